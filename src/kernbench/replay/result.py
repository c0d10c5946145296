"""What a replay found (``ReplayResult``) and reading a run's verdict: no heavy imports.

The process that starts the replay child (``kernbench replay``, ``kb.replay``) imports only
this module, ``child`` and the standard library before it hands over: numpy, pyarrow and the
rest load once, in the child (ADR-0515). ``summary`` and ``exit_code`` say what replay
found from the verdict alone; ``ReplayResult.status`` names what happened (``verified``,
``unverified``, ``wrong``, ``failed``: ``schemas/replay_status.py``, ADR-0830). Output
arrays are held as stored (bfloat16 as uint16 bits); ``ReplayResult.outputs`` shows them in
their trace dtype (bfloat16 as ``ml_dtypes.bfloat16``, imported only when such an output is
looked at).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernbench.errors import ReplayError, TraceFormatError
from kernbench.schemas.replay_status import UNVERIFIED, VERIFIED, WRONG, verdict_status

EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT, EXIT_CRASH = 0, 1, 2, 3
#: the tag of the replay child's stderr line when a memory limit refused an allocation
OUT_OF_MEMORY = "out of memory"


class Outputs(Mapping[str, Any]):
    """Output name -> array in its trace dtype; ``raw`` holds the stored arrays (bf16 as
    uint16 bits), ``dtypes`` their trace dtype names."""

    def __init__(self, raw: Mapping[str, Any] | None = None,
                 dtypes: Mapping[str, str] | None = None) -> None:
        self.raw = dict(raw or {})
        self.dtypes = dict(dtypes or {})

    def __getitem__(self, name: str) -> Any:
        arr = self.raw[name]
        if self.dtypes.get(name) == "bfloat16" and arr.dtype.name == "uint16":
            import ml_dtypes

            return arr.view(ml_dtypes.bfloat16)
        return arr

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __repr__(self) -> str:
        return f"Outputs({sorted(self.raw)})"


@dataclass(frozen=True)
class ReplayResult:
    """What a replay found. ``verdict`` is the parsed ``replay/verdict.json``; ``status``,
    ``verified`` and ``ok`` are read from it (ADR-0830)."""

    outputs: Mapping[str, Any]
    max_abs_err: dict[str, float]
    verdict: dict[str, Any]
    path: Path | None = field(default=None, compare=False)

    @property
    def status(self) -> str:
        """``"verified"``, ``"unverified"`` (clean, but not every output was compared: no
        reference, or one that returned none or only some outputs), ``"wrong"`` (an output
        did not match) or ``"failed"`` (an invalid read, or the reference failed)."""
        return verdict_status(self.verdict)

    @property
    def verified(self) -> bool:
        """A reference ran, compared every output, and each matched."""
        return self.status == VERIFIED

    @property
    def ok(self) -> bool:
        """``verified``: ``assert res.ok`` holds only when the outputs match the reference;
        a replay that compared nothing is not ok (``status`` says ``"unverified"``)."""
        return self.verified

    def __repr__(self) -> str:
        from kernbench.notebook import replay_repr

        return replay_repr(self)

    def _repr_html_(self) -> str:
        from kernbench.notebook import replay_html

        return replay_html(self)


def new_run_id() -> str:
    return uuid.uuid4().hex


def abs_errors(verdict: dict[str, Any]) -> dict[str, float]:
    return {name: o["max_abs_err"] for name, o in verdict["outputs"].items()
            if o.get("checked") and o.get("max_abs_err") is not None}


def load_verdict(path: str | Path, run_id: str | None = None) -> dict[str, Any]:
    """``path/replay/verdict.json``; with ``run_id``, only that run's (ReplayError if
    ``replay/`` holds no verdict of that run)."""
    vpath = Path(path) / "replay" / "verdict.json"
    try:
        verdict = json.loads(vpath.read_text())
    except FileNotFoundError:
        if run_id is not None:
            raise ReplayError(f"the replay process wrote no verdict ({vpath} is missing)"
                              ) from None
        raise TraceFormatError(f"{path} has not been replayed ({vpath} is missing)") from None
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{vpath}: unreadable ({exc})") from None
    if not isinstance(verdict, dict):
        raise TraceFormatError(f"{vpath}: not a verdict object")
    if run_id is not None and verdict.get("run_id") != run_id:
        raise ReplayError(f"the replay process wrote no verdict of this run ({vpath} is "
                          "from an earlier replay; not reporting it)")
    return verdict


def summary(result: ReplayResult) -> str:
    """One line saying what replay found (its first word: ``verified``, ``WRONG``,
    ``FAILED``, or ``replayed ...; not verified``)."""
    v = result.verdict
    head = f"{v['n_executed']}/{v['n_ops']} ops"
    status = result.status
    if v.get("invalid_read"):
        return f"FAILED: {head}: {v['invalid_read']['message']}"
    if v.get("error"):
        return f"FAILED: {head}: {v['error']}"
    if v.get("reference") is None:
        return f"replayed {head}, no invalid reads; not verified: {v.get('reference_note')}"
    checked = {n: o for n, o in v["outputs"].items() if o.get("checked")}
    errs = ", ".join(f"{n} max_abs_err={o['max_abs_err']:.3g}" if o["max_abs_err"] is not None
                     else f"{n} {o.get('message')}" for n, o in checked.items())
    if status == UNVERIFIED:
        missing = ", ".join(n for n, o in v["outputs"].items() if not o.get("checked"))
        return (f"replayed {head}, no invalid reads; not verified: the reference "
                f"{v['reference']} compared {errs or 'no output'}"
                f"{f' and not {missing}' if missing else ''}")
    word = "verified" if status == VERIFIED else "WRONG"
    nonfinite = v.get("first_nonfinite")
    extra = (f"; first non-finite value from op {nonfinite['op_id']} ({nonfinite['name']} at "
             f"{nonfinite['src']})" if nonfinite and status == WRONG else "")
    return f"{word}: {head} against {v['reference']}: {errs}{extra}"


def exit_code(result: ReplayResult, require_reference: bool = False) -> int:
    """0 verified (or unverified but clean, unless a reference is required), else 1."""
    status = result.status
    if status == VERIFIED or (status == UNVERIFIED and not require_reference):
        return EXIT_OK
    return EXIT_WRONG
