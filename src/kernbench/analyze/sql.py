"""``kernbench sql``: polars SQL over a trace's tables.

Tables: ``ops`` (the op log; ``inputs`` is a list of operand structs and ``output`` a
struct, so ``output.addr`` works), ``operands`` (one flat row per operand: op_id, role,
idx, space, mem_pe, addr, nbytes, shape, dtype, transposed), ``tensors``, and ``values``
when the trace was replayed. Queries read data only; nothing in a trace is executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.frames import VALUES_FILE, open_trace, operands, scan_ops
from kernbench.analyze.report import format_table, to_json
from kernbench.errors import BadInputError
from kernbench.schemas.arrow import read_table
from kernbench.trace import Trace


def tables(trace: Trace) -> dict[str, pl.LazyFrame]:
    """The tables a query may name, as lazy frames."""
    ops = scan_ops(trace)
    out = {"ops": ops, "operands": operands(ops),
           "tensors": pl.from_arrow(trace.tensors_table).lazy()}  # type: ignore[union-attr]
    if (trace.path / VALUES_FILE).is_file():
        values = read_table(trace.path / VALUES_FILE, "kernbench-values")
        out["values"] = pl.from_arrow(values).lazy()  # type: ignore[union-attr]
    return out


@dataclass(frozen=True)
class SqlResult:
    query: str
    frame: pl.DataFrame
    exit_code: int = 0

    def to_text(self) -> str:
        rows = [[v if isinstance(v, int | float | str) or v is None else str(v) for v in r]
                for r in self.frame.rows()]
        return format_table(self.frame.columns, rows) + f"\n({self.frame.height} rows)\n"

    def to_dict(self) -> list[dict[str, Any]]:
        return self.frame.to_dicts()

    def to_json(self) -> str:
        return to_json(self.to_dict())


def sql(trace_or_path: Trace | str | Path, query: str) -> SqlResult:
    """Run a SQL query over the trace's tables; BadInputError if it does not run."""
    trace = open_trace(trace_or_path)
    ctx = pl.SQLContext(tables(trace))
    try:
        frame = ctx.execute(query, eager=True)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInputError(f"sql: {first} (tables: {', '.join(ctx.tables())})") from None
    return SqlResult(query, frame)
