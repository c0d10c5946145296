"""``kb.record``, the user's entry point: a case in any of the forms the ``kb_record`` fixture
takes (``kernels.registry.as_case``), recorded by ``record.recorder.record``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernbench.kernels.registry import as_case
from kernbench.record.recorder import record as record_case
from kernbench.trace import Trace
from kernbench.trace.hw import HwConfig


def record(case: Any, out: str | Path, hw: HwConfig | str | Path | None = None,
           progress: Callable[[int], Any] | None = None,
           programs: Callable[[int, int], Any] | None = None, **params: Any) -> Trace:
    """Phase 1: record ``case`` on ``hw`` into the trace directory ``out``.

    ``case`` is a ``kb.Case``, a built-in case name (``"gqa-decode"``), ``"module:function"``
    or a case factory; the last three are built with ``params`` (keyword arguments, typed by
    the factory's defaults): ``kb.record("scale-exp", out="s.ktrace", tile=256)``.
    ``hw``: a ``HwConfig``, a preset name or a TOML path (default ``ahbm-v2`` or
    ``$KERNBENCH_HW``). ``progress`` is called with the number of ops recorded so far,
    ``programs`` with the programs finished so far and the grid's
    (``record.recorder.record``)."""
    return record_case(as_case(case, params), out, hw=hw, progress=progress,
                       programs=programs)
