"""``kernbench sql``: polars SQL over a trace's tables, and nothing else (ADR-0125).

Tables: ``ops`` (the op log; ``inputs`` is a list of operand structs and ``output`` a
struct, so ``output.addr`` works), ``operands`` (one flat row per operand: op_id, role,
idx, space, mem_pe, addr, nbytes, shape, dtype, transposed), ``tensors``, ``shared`` (how
long each shared part of the chip delayed an op: op_id, part, resource, wait_ps; no rows
when nothing waited or the hardware shares nothing), and ``values`` when the trace was
replayed. Queries read data only; nothing in a trace is executed.

Only the registered frames are reachable: a query naming a table function or any function
that reads files or URLs (``read_csv``, ``read_parquet``, ``scan_*``, ...) is refused before
polars sees it, because polars resolves such functions (and reads the file or URL) while
planning the query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.frames import load_shared, load_values, open_trace, operands, scan_ops
from kernbench.analyze.report import format_table, to_json
from kernbench.errors import BadInputError
from kernbench.trace import Trace

#: the longest query accepted
MAX_QUERY = 100_000
_COMMENT = re.compile(r"--[^\n]*|/\*.*?(\*/|$)", re.S)
_STRING = re.compile(r"'(?:[^']|'')*('|$)", re.S)
_QUOTES = re.compile(r"[\"`\[\]]")
#: function names that read files, URLs or databases (polars' table functions and kin)
_FILE_FUNCTION = re.compile(r"\b((?:read|scan|write|sink|load|copy|import|export)_\w*)\s*\(",
                            re.I)
#: ``FROM f(`` / ``JOIN f(``: a table function, whatever its name
_TABLE_FUNCTION = re.compile(r"\b(?:from|join)\s+(\w[\w.]*)\s*\(", re.I)
_STATEMENTS = re.compile(r"^\s*(copy|attach|install|load|export|import|pragma|set)\b", re.I)


def _code(query: str) -> str:
    """The query with comments and string literals blanked and identifier quotes dropped:
    what is left is the code polars will act on (over-approximating, never less)."""
    code = _COMMENT.sub(" ", query)
    code = _STRING.sub("''", code)
    return _QUOTES.sub(" ", code)


def guard(query: str, tables: list[str]) -> None:
    """BadInputError if ``query`` could reach anything but the registered ``tables``."""
    if len(query) > MAX_QUERY:
        raise BadInputError(f"sql: query of {len(query)} characters is over {MAX_QUERY}")
    code = _code(query)
    for pattern, what in ((_FILE_FUNCTION, "reads files or URLs"),
                          (_TABLE_FUNCTION, "is a table function")):
        for m in pattern.finditer(code):
            name = m.group(1)
            if pattern is _TABLE_FUNCTION and name.lower() in {"select", "values", "lateral"}:
                continue
            raise BadInputError(f"sql: {name!r} {what}; a query may only use the trace's "
                                f"tables ({', '.join(tables)})")
    if _STATEMENTS.match(code):
        raise BadInputError(f"sql: only queries over the trace's tables are allowed, got "
                            f"{code.split()[0]!r}")


def tables(trace: Trace, warnings: list[str] | None = None) -> dict[str, pl.LazyFrame]:
    """The tables a query may name, as lazy frames (``values`` only if usable; a corrupt
    one is left out with a line in ``warnings``)."""
    ops = scan_ops(trace)
    out = {"ops": ops, "operands": operands(ops),
           "tensors": trace.tensors.lazy(), "shared": load_shared(trace).lazy()}
    values = load_values(trace, warnings if warnings is not None else [])
    if values is not None:
        out["values"] = values.lazy()
    return out


@dataclass(frozen=True)
class SqlResult:
    query: str
    frame: pl.DataFrame
    exit_code: int = 0
    warnings: tuple[str, ...] = ()

    def to_text(self) -> str:
        rows = [[v if isinstance(v, int | float | str) or v is None else str(v) for v in r]
                for r in self.frame.rows()]
        return format_table(self.frame.columns, rows) + f"\n({self.frame.height} rows)\n"

    def to_dict(self) -> list[dict[str, Any]]:
        return self.frame.to_dicts()

    def to_json(self) -> str:
        return to_json(self.to_dict())


def sql(trace_or_path: Trace | str | Path, query: str) -> SqlResult:
    """Run a SQL query over the trace's tables; BadInputError if it does not run or could
    reach anything else."""
    trace = open_trace(trace_or_path)
    warnings: list[str] = []
    return run_query(tables(trace, warnings), query, warnings)


def run_query(frames: dict[str, pl.LazyFrame], query: str, warnings: list[str] | None = None
              ) -> SqlResult:
    """``query`` over ``frames`` (a trace's tables, or a sweep's), guarded; BadInputError if
    it does not run or could reach anything else."""
    warnings = warnings or []
    guard(query, sorted(frames))
    ctx = pl.SQLContext(frames)
    try:
        frame = ctx.execute(query, eager=True)
    except (pl.exceptions.PolarsError, ValueError, TypeError, OverflowError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        why = f"; {warnings[0]}" if warnings else ""
        raise BadInputError(f"sql: {first[:300]} (tables: {', '.join(ctx.tables())}{why})"
                            ) from None
    return SqlResult(query, count_named(frame, query), warnings=tuple(warnings))


_COUNT_STAR = re.compile(r"\bcount\s*\(\s*\*\s*\)", re.I)
_LEN = re.compile(r"\blen\b", re.I)


def count_named(frame: pl.DataFrame, query: str) -> pl.DataFrame:
    """polars names an unaliased ``COUNT(*)`` column ``len``: call it ``count`` (unless the
    query itself says ``len`` somewhere or a ``count`` column exists)."""
    code = _code(query)
    if ("len" in frame.columns and "count" not in frame.columns
            and _COUNT_STAR.search(code) and not _LEN.search(code)):
        return frame.rename({"len": "count"})
    return frame
