"""Loading a trace for analysis: verified opening, lazy op scans, operand frames.

Every analysis goes through here, so there is one place that knows the file layout and the
column types polars sees (dictionary columns are read as plain strings).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import polars as pl
import pyarrow as pa

from kernbench.errors import TraceFormatError
from kernbench.schemas.arrow import SHARED, VALUES
from kernbench.schemas.dtypes import DTYPES
from kernbench.trace import Trace
from kernbench.trace.hw import HwConfig
from kernbench.trace.parquet import open_parquet, scan
from kernbench.trace.replayed import replay_status

#: element size in bytes of every dtype name a trace may hold
ITEMSIZE: dict[str, int] = {name: d.itemsize for name, d in DTYPES.items()}
#: dictionary-encoded op columns, read as strings so comparisons need no categories
DICT_COLUMNS = ("kind", "name", "engine", "src")
VALUES_FILE = Path("replay") / "values.parquet"
#: what delayed each op on hardware with a shared part (optional, sparse)
SHARED_FILE = "shared.parquet"
#: ``load_shared``'s frame: the Arrow schema with ``part`` as a string
SHARED_SCHEMA = pl.Schema({"op_id": pl.Int64(), "part": pl.String(), "resource": pl.String(),
                           "wait_ps": pl.Int64()})


def open_trace(trace_or_path: Trace | str | Path, strict: bool = True) -> Trace:
    """A verified and validated ``Trace`` from a Trace or a directory path; ``strict``
    refuses an invalid trace (``check`` passes False and lists the findings)."""
    trace = (trace_or_path if isinstance(trace_or_path, Trace)
             else Trace.open(trace_or_path, strict=strict))
    return trace.validated()


def hw_of(trace: Trace) -> HwConfig:
    """The hardware config stored whole in the manifest."""
    try:
        return HwConfig.from_dict(trace.manifest["hw"], where=f"{trace.path}/manifest.json hw")
    except (KeyError, TypeError) as exc:
        raise TraceFormatError(f"{trace.path}/manifest.json: no usable hw config ({exc})") from None


#: a frame, lazy or not: ``_strings`` gives back the kind it was given
_Frame = TypeVar("_Frame", pl.LazyFrame, pl.DataFrame)


def _strings(frame: _Frame, names: tuple[str, ...]) -> _Frame:
    present = [n for n in names if n in frame.collect_schema().names()]
    return frame.with_columns(pl.col(present).cast(pl.String))


def scan_ops(trace: Trace) -> pl.LazyFrame:
    """Lazy scan of ``ops.parquet`` after checking its footer (``kernbench.trace.parquet``)."""
    return _strings(scan(trace.path / "ops.parquet", "kernbench-ops"), DICT_COLUMNS)


def load_shared(trace: Trace) -> pl.DataFrame:
    """How long each shared part delayed an op (``shared.parquet`` as the validator read
    it; no rows when the trace has none), ``part`` as a string."""
    return _strings(pl.DataFrame(trace.shared_table), ("part",))


def scan_shared(trace: Trace) -> pl.LazyFrame:
    """Lazy scan of ``shared.parquet`` after checking its footer, like ``scan_ops`` (no
    rows when the trace has none), ``part`` as a string."""
    if SHARED_FILE in (trace.manifest.get("files") or {}):
        frame = scan(trace.path / SHARED_FILE, "kernbench-shared")
    else:
        frame = pl.DataFrame(SHARED.empty_table()).lazy()
    return _strings(frame, ("part",))


def load_ops(trace: Trace) -> pl.DataFrame:
    """The whole op log (operands included) as a DataFrame with string dictionary columns."""
    return ops_frame(trace.ops_table)


def ops_frame(table: pa.Table) -> pl.DataFrame:
    """An ops Arrow table as the DataFrame analyses expect (dictionary columns as strings)."""
    return _strings(pl.DataFrame(table), DICT_COLUMNS)


def load_values(trace: Trace, warnings: list[str] | None = None) -> pl.DataFrame | None:
    """``replay/values.parquet`` if Phase 2 wrote one, else None. A corrupt one, or one of a
    replay of other contents than the trace's (ADR-0538), is None too when ``warnings`` is
    given (a line saying why is appended), else TraceFormatError."""
    path = trace.path / VALUES_FILE
    if not path.exists() and not path.is_symlink():
        return None
    stale = replay_status(trace.path, trace.manifest)
    if stale is not None:
        msg = f"ignoring {path}: not this trace's replay: {stale}"
        if warnings is None:
            raise TraceFormatError(msg)
        warnings.append(msg)
        return None
    try:
        pf = open_parquet(path, "kernbench-values")
        table = pf.read(columns=list(VALUES.names)).replace_schema_metadata(None)
        frame = pl.DataFrame(table)
        if frame["op_id"].null_count() or frame["checksum"].null_count():
            raise TraceFormatError(f"{path}: null op_id or checksum")
    except (TraceFormatError, pa.ArrowException, OSError, ValueError) as exc:
        if warnings is None:
            raise TraceFormatError(f"{path}: unusable ({exc})") from None
        msg = (str(exc).splitlines() or [type(exc).__name__])[0].removeprefix(f"{path}: ")
        warnings.append(f"ignoring {path}: {msg[:200]}")
        return None
    return frame


def nbytes_expr(operand: pl.Expr) -> pl.Expr:
    """Bytes an operand struct names: ``prod(shape) * itemsize(dtype)``."""
    return elements_expr(operand) * operand.struct.field("dtype").replace_strict(
        ITEMSIZE, default=None, return_dtype=pl.Int64)


def elements_expr(operand: pl.Expr) -> pl.Expr:
    """Elements an operand struct names: ``prod(shape)`` (1 for a scalar shape ``[]``)."""
    return shape_elements(operand.struct.field("shape"))


def shape_elements(shape: pl.Expr) -> pl.Expr:
    """``prod(shape)`` of a list-of-int64 shape column (1 for ``[]``)."""
    return shape.list.eval(pl.element().product()).list.first().fill_null(1).cast(pl.Int64)


def operands(ops: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """One row per operand: op_id, role (``in``/``out``), idx, space, mem_pe, addr, nbytes,
    shape, dtype, transposed. ``mem_pe`` is the operand's PE (whose memory), not the issuer."""
    lf = ops.lazy()
    fields = ["space", "addr", "shape", "dtype", "transposed"]
    ins = (lf.select("op_id", pl.col("inputs"))
           .with_columns(idx=pl.int_ranges(pl.col("inputs").list.len()))
           .explode("inputs", "idx")
           .filter(pl.col("inputs").is_not_null())
           .select("op_id", pl.lit("in").alias("role"), pl.col("idx").cast(pl.Int32),
                   pl.col("inputs").alias("o")))
    out = (lf.select("op_id", pl.col("output").alias("o"))
           .filter(pl.col("o").is_not_null())
           .select("op_id", pl.lit("out").alias("role"), pl.lit(0, pl.Int32).alias("idx"), "o"))
    both = pl.concat([ins, out])
    o = pl.col("o")
    return both.select(
        "op_id", "role", "idx",
        *[o.struct.field(f) for f in fields[:2]],
        o.struct.field("pe").alias("mem_pe"),
        nbytes_expr(o).alias("nbytes"),
        *[o.struct.field(f) for f in fields[2:]],
    ).select("op_id", "role", "idx", "space", "mem_pe", "addr", "nbytes", "shape", "dtype",
             "transposed")


