"""Schemas, versions and enums of the trace format (the single source of truth)."""

from kernbench.schemas import arrow, dtypes, ops
from kernbench.schemas.arrow import SCHEMA_VERSION
from kernbench.schemas.ops import Engine, Kind, Op

__all__ = ["arrow", "dtypes", "ops", "SCHEMA_VERSION", "Engine", "Kind", "Op"]
