"""Analysis (SPEC §7): polars queries over traces — metrics, invariants, diff, report,
Perfetto export, SQL."""

from __future__ import annotations

from kernbench.analyze.metrics import metrics

__all__ = ["metrics"]
