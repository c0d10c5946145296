"""Pictures of traces and sweeps (``kernbench plot``, ``kernbench report --html``).

matplotlib draws on its Agg canvas only (``Figure`` objects, never ``pyplot``), so plotting
needs no display and leaves no global state behind.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib import rc_context
from matplotlib.figure import Figure

from kernbench.errors import BadInputError

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

#: output formats by file suffix -> matplotlib format name
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
DPI = 110
#: fixed SVG ids (a salt instead of random ones): the same trace gives the same bytes
STABLE: dict[RcKeyType, Any] = {"svg.hashsalt": "kernbench"}


@dataclass(frozen=True)
class PlotReport:
    """What ``kernbench plot`` wrote."""

    path: str
    source: str
    kind: str  # "trace" | "sweep" | "access (TENSOR)"
    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.path, "source": self.source, "kind": self.kind}

    def to_text(self) -> str:
        return f"wrote the {self.kind} picture of {self.source} to {self.path}\n"

    def to_json(self) -> str:
        from kernbench.analyze.report import to_json

        return to_json(self.to_dict())


def save(fig: Figure, out: str | Path) -> Path:
    """Write ``fig`` to ``out`` in the format its suffix names (png, svg, pdf)."""
    out = Path(out)
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise BadInputError(f"cannot tell the picture format of {str(out)!r}; "
                            f"name it {' or '.join('*' + s for s in FORMATS)}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with rc_context(STABLE):
            fig.savefig(out, format=fmt, dpi=DPI, metadata=_metadata(fmt))
    except OSError as exc:
        raise BadInputError(f"cannot write {str(out)!r}: {exc.strerror}") from None
    return out


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=_metadata("png"))
    return buf.getvalue()


def _metadata(fmt: str) -> dict[str, Any]:
    """No creation dates in the files: the same trace gives the same picture bytes."""
    return {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt, {})


def figure_of(path: str | Path) -> tuple[Figure, str]:
    """The figure of a trace directory or a sweep directory, and which it was."""
    from kernbench.plot.study_figure import parts, study_figure
    from kernbench.plot.sweep_figure import is_sweep, sweep_figure

    path = Path(path)
    if is_sweep(path):
        return sweep_figure(path), "sweep"
    if parts(path):  # a suite of sweeps over ahbm-v3's shared parts (docs/hardware-study.md)
        return study_figure(path), "hardware study"
    from kernbench.analyze.frames import hw_of, open_trace
    from kernbench.analyze.metrics import metrics
    from kernbench.plot.trace_figure import trace_figure

    trace = open_trace(path)
    return trace_figure(trace, metrics(trace), hw_of(trace).kernel_scratch_bytes), "trace"


def plot(path: str | Path, out: str | Path, access: str | None = None) -> PlotReport:
    """Draw the picture of a trace or sweep into ``out`` (.png, .svg or .pdf); with
    ``access=TENSOR``, the picture of that HBM tensor's accesses."""
    if Path(out).suffix.lower() not in FORMATS:
        save(Figure(), out)  # raises the one-line format error before any work
    if access is not None:
        from kernbench.analyze.frames import open_trace
        from kernbench.plot.access_figure import access_figure

        fig, kind = access_figure(open_trace(path), access), f"access ({access})"
    else:
        fig, kind = figure_of(path)
    return PlotReport(str(save(fig, out)), str(path), kind)


__all__ = ["PlotReport", "plot", "save", "png_bytes", "figure_of"]
