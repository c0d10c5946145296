"""Design-space sweeps (docs/sweeps.md): a TOML spec of points, run on a local process pool or on
Ray, collected into a sweep directory (one trace per point and ``points.parquet``), resumed
after a crash, and analysed as a whole (report, check, diff, sql)."""

from __future__ import annotations

from kernbench.sweep.builtin import BUILTIN, resolve_spec
from kernbench.sweep.driver import Progress, SweepSummary, run_sweep
from kernbench.sweep.spec import SweepSpec, load_spec_file, parse_spec
from kernbench.sweep.store import is_sweep

__all__ = ["BUILTIN", "Progress", "SweepSpec", "SweepSummary", "is_sweep", "load_spec_file",
           "parse_spec", "resolve_spec", "run_sweep"]
