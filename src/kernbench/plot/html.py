"""``kernbench report --html``: one self-contained HTML file (images inline as base64 PNG,
no scripts, no external links), for a trace or a sweep."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from kernbench.errors import BadInputError
from kernbench.plot import png_bytes

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1300px}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
img{max-width:100%;display:block;margin:1em 0}
img.half{display:inline-block;max-width:49%;vertical-align:top;margin-right:1%}
h2{border-bottom:1px solid #ddd;padding-bottom:4px}"""


@dataclass(frozen=True)
class HtmlReport:
    path: str
    source: str
    n_images: int
    exit_code: int = 0

    def to_text(self) -> str:
        return (f"wrote {self.path} ({self.n_images} pictures inline) for {self.source}\n")

    def to_json(self) -> str:
        from kernbench.analyze.report import to_json

        return to_json({"html": self.path, "source": self.source, "images": self.n_images})


def img(fig: Figure, alt: str, cls: str = "") -> str:
    data = base64.b64encode(png_bytes(fig)).decode("ascii")
    klass = f' class="{cls}"' if cls else ""
    return f'<img{klass} alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    from kernbench.notebook import fmt

    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, parts: list[str]) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>" + "\n".join(parts) + "</body></html>\n")


def trace_parts(path: Path) -> tuple[str, list[str], int]:
    from kernbench.analyze.frames import hw_of, open_trace
    from kernbench.analyze.report import SUMMARY, report
    from kernbench.plot.trace_figure import panels

    trace = open_trace(path)
    rep = report(trace)
    m = rep.metrics
    figs = panels(trace, m, hw_of(trace).kernel_scratch_bytes)
    parts = ["<h2>summary</h2>", table(["metric", "value"], [[lbl, m[k]] for lbl, k in SUMMARY]),
             "<h2>engine timeline</h2>", img(figs["timeline"], "engine timeline per PE"),
             "<h2>scratch occupancy</h2>", img(figs["scratch"], "scratch occupancy per PE"),
             "<h2>stalls and roofline</h2>",
             img(figs["wait"], "stall time by source line", "half")
             + img(figs["roofline"], "roofline", "half"),
             "<h2>engines</h2>", table(["engine", "busy_ps", "busy_max_ps", "util",
                                        "util_mean", "roofline_ps"], rep.engine_rows()),
             "<h2>roofline ceilings</h2>", table(["ceiling", "ideal_ps", "gflops",
                                                  "frac_of_latency", "binds"],
                                                 rep.ceiling_rows()),
             *critical_parts(rep.critical),
             "<h2>ops</h2>", table(["kind", "name", "count", "busy_ps", "nbytes", "wait_ps"],
                                   [list(r.values()) for r in rep.by_op])]
    return f"kernbench report: {trace.path} ({rep.case})", parts, len(figs)


def critical_parts(c: dict[str, Any]) -> list[str]:
    """The critical path's tables (``path_summary.summary``): by engine, by source line, by
    part, by shared resource, and the head-of-line waits."""
    from kernbench.analyze.report import critical_tables

    if not c:
        return []
    parts = ["<h2>critical path</h2>",
             f"<p>The chain of ops that sets the latency: {c['ops']} ops covering "
             f"{c['share']:.3f} of it (black on the timeline).</p>"]
    for title, headers, rows in critical_tables(c):
        parts += [f"<h3>{html.escape(title)}</h3>", table(headers, rows)]
    return parts


def sweep_parts(path: Path) -> tuple[str, list[str], int]:
    from kernbench.plot.sweep_figure import load_points, sweep_figure

    points, params = load_points(path)
    cols = [c for c in ["point_id", *params, "latency_ps", "efficiency", "scratch_peak_bytes",
                        "replay_ok"] if c in points.columns]
    if "latency_ps" in cols:
        points = points.sort("latency_ps")
    rows = points.select(cols).head(200).rows()
    parts = ["<h2>charts</h2>", img(sweep_figure(path), "sweep charts and Pareto front"),
             f"<h2>points ({points.height} ok)</h2>", table(cols, rows)]
    return f"kernbench sweep report: {path}", parts, 1


def html_report(path: str | Path, out: str | Path) -> HtmlReport:
    """Write the self-contained HTML report of a trace or sweep directory to ``out``."""
    from kernbench.plot.sweep_figure import is_sweep

    path = Path(path)
    title, parts, n = (sweep_parts if is_sweep(path) else trace_parts)(path)
    out = Path(out)
    try:
        out.write_text(page(title, parts), encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"cannot write {str(out)!r}: {exc.strerror}") from None
    return HtmlReport(str(out), str(path), n)
