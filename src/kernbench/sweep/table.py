"""``points.parquet``: one row per point, in spec order, with a schema that depends only on
the rows (never on which engine ran them or in which order they finished)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from kernbench.errors import TraceFormatError
from kernbench.sweep.points import Point
from kernbench.sweep.spec import SweepSpec
from kernbench.sweep.store import POINTS_FILE, write_atomic
from kernbench.trace import writing

#: columns after the metrics, in order
TAIL = ("replay_ok", "replay_max_abs_err", "check_ok", "check_violations", "retimed_from",
        "wall_s", "record_wall_s", "replay_wall_s")
#: columns that vary from run to run (left out when comparing two runs of one sweep)
WALL_COLUMNS = ("wall_s", "record_wall_s", "replay_wall_s")


def normalise(row: dict[str, Any]) -> dict[str, Any]:
    """A worker's row through JSON, so every engine (and a resumed point) gives the same
    Python values."""
    return json.loads(json.dumps(row))


def flat_row(point: Point, case: str, row: dict[str, Any]) -> dict[str, Any]:
    """The points.parquet row of ``point``: id, case, swept columns, status, metrics, tail."""
    out: dict[str, Any] = {"point_id": point.point_id, "case": case, **dict(point.columns),
                           "status": row["status"], "error": row.get("error")}
    out.update(row.get("metrics") or {})
    for key in TAIL:
        out[key] = row.get(key)
    return out


def _dtype(values: Iterable[Any]) -> pl.DataType:
    seen = {type(v) for v in values if v is not None}
    if not seen:
        return pl.Null()
    if seen == {bool}:
        return pl.Boolean()
    if seen <= {int}:
        return pl.Int64()
    if seen <= {int, float}:
        return pl.Float64()
    return pl.String()


def frame(spec: SweepSpec, rows: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """A DataFrame of flat rows (already in spec order) with a deterministic schema."""
    rows = list(rows)
    fixed = ["point_id", "case", *spec.swept, *spec.hw_columns, "status", "error"]
    metric_cols: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k not in metric_cols and k not in fixed and k not in TAIL:
                metric_cols[k] = None
    columns = [*fixed, *metric_cols, *TAIL]
    data = {}
    for c in columns:
        values = [r.get(c) for r in rows]
        dtype = _dtype(values)
        if c in ("error", "check_violations", "point_id", "case", "status", "retimed_from"):
            dtype = pl.String()
        elif c in ("replay_ok", "check_ok"):
            dtype = pl.Boolean()
        elif c in TAIL and isinstance(dtype, pl.Null | pl.Int64):
            dtype = pl.Float64()
        if isinstance(dtype, pl.String):
            values = [None if v is None else str(v) for v in values]
        data[c] = pl.Series(c, values, dtype=dtype, strict=False)
    return pl.DataFrame(data)


def write_points(root: Path, table: pl.DataFrame) -> None:
    """Write ``points.parquet`` atomically (temporary sibling, then rename)."""
    write_atomic(Path(root) / POINTS_FILE, writing.write_frame(table, "points"))


def read_points(root: Path) -> pl.DataFrame:
    path = Path(root) / POINTS_FILE
    try:
        pq.read_schema(path)
        return pl.read_parquet(path)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise TraceFormatError(f"{path}: not a readable points table ({exc})") from None
