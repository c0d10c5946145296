"""Analysis (docs/analysis.md): polars queries over traces — metrics, invariants, rules, diff,
report, the critical path, Perfetto export, SQL.

Every command-level function returns a report object with ``to_text()``, ``to_json()`` and
``exit_code``; ``metrics`` returns a flat dict.
"""

from __future__ import annotations

# submodules first, then the functions that share their names
from kernbench.analyze import check as _check_mod  # noqa: F401
from kernbench.analyze import diff as _diff_mod  # noqa: F401
from kernbench.analyze import export as _export_mod  # noqa: F401
from kernbench.analyze import metrics as _metrics_mod  # noqa: F401
from kernbench.analyze import sql as _sql_mod  # noqa: F401
from kernbench.analyze.check import CheckReport, check
from kernbench.analyze.critical import critical_path
from kernbench.analyze.diff import DiffReport, diff
from kernbench.analyze.export import ExportReport, export_perfetto
from kernbench.analyze.invariants import INVARIANTS
from kernbench.analyze.metrics import metrics
from kernbench.analyze.race import hazards
from kernbench.analyze.report import MetricsReport, report
from kernbench.analyze.sql import SqlResult, sql
from kernbench.analyze.thresholds import Rule, load_rules

__all__ = [
    "metrics", "check", "critical_path", "diff", "report", "export_perfetto", "sql", "hazards",
    "load_rules",
    "Rule", "INVARIANTS", "CheckReport", "DiffReport", "MetricsReport", "ExportReport",
    "SqlResult",
]
