"""Arrow schemas of every trace file: the single source of truth for the trace format.

Each written file carries schema-level metadata key ``kernbench`` =
``{"format": ..., "schema_version": ...}``; readers reject an unknown major version.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.errors import TraceFormatError

#: the schema version of every file's own metadata (each file format is at version 1)
SCHEMA_VERSION = 1
SUPPORTED_MAJOR = 1
#: the manifest's ``schema_version``: 1, or 2 when the trace uses indexed memory (an
#: ``access.parquet``, or an op of ``ops.VERSION_2``); readers accept both (docs/trace-format)
MANIFEST_VERSION_INDEXED = 2
MANIFEST_MAJORS = (1, 2)
META_KEY = b"kernbench"

_dict_str = pa.dictionary(pa.int32(), pa.string())

OPERAND = pa.struct([
    pa.field("space", pa.string(), nullable=False),
    pa.field("pe", pa.int32(), nullable=False),
    pa.field("addr", pa.int64(), nullable=False),
    pa.field("shape", pa.list_(pa.int64()), nullable=False),
    pa.field("dtype", pa.string(), nullable=False),
    pa.field("transposed", pa.bool_(), nullable=False),
])


def _with_meta(schema: pa.Schema, fmt: str) -> pa.Schema:
    meta = json.dumps({"format": fmt, "schema_version": SCHEMA_VERSION}, sort_keys=True)
    return schema.with_metadata({META_KEY: meta.encode()})


OPS = _with_meta(pa.schema([
    pa.field("op_id", pa.int64(), nullable=False),
    pa.field("pe", pa.int32(), nullable=False),
    pa.field("program", pa.int32(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("kind", _dict_str, nullable=False),
    pa.field("name", _dict_str, nullable=False),
    pa.field("engine", _dict_str, nullable=False),
    pa.field("parent", pa.int64(), nullable=True),
    pa.field("t_issue_ps", pa.int64(), nullable=False),
    pa.field("t_start_ps", pa.int64(), nullable=False),
    pa.field("t_end_ps", pa.int64(), nullable=False),
    pa.field("busy_ps", pa.int64(), nullable=False),
    pa.field("wait_ps", pa.int64(), nullable=False),
    pa.field("inputs", pa.list_(OPERAND), nullable=False),
    pa.field("output", OPERAND, nullable=True),
    pa.field("num_elements", pa.int64(), nullable=False),
    pa.field("nbytes", pa.int64(), nullable=False),
    pa.field("flops", pa.int64(), nullable=False),
    pa.field("scratch_cursor", pa.int64(), nullable=False),
    pa.field("scope_depth", pa.int16(), nullable=False),
    pa.field("attrs", pa.string(), nullable=False),
    pa.field("src", _dict_str, nullable=False),
]), "kernbench-ops")

TENSORS = _with_meta(pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("role", pa.string(), nullable=False),
    pa.field("pe", pa.int32(), nullable=False),
    pa.field("addr", pa.int64(), nullable=False),
    pa.field("dtype", pa.string(), nullable=False),
    pa.field("shape", pa.list_(pa.int64()), nullable=False),
    pa.field("init", pa.string(), nullable=False),
    pa.field("data", pa.binary(), nullable=True),
]), "kernbench-tensors")

VALUES = _with_meta(pa.schema([
    pa.field("op_id", pa.int64(), nullable=False),
    pa.field("checksum", pa.uint64(), nullable=False),
    pa.field("min", pa.float64(), nullable=True),
    pa.field("max", pa.float64(), nullable=True),
    pa.field("mean", pa.float64(), nullable=True),
    pa.field("nonfinite", pa.int64(), nullable=False),
]), "kernbench-values")

OUTPUTS = _with_meta(pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("dtype", pa.string(), nullable=False),
    pa.field("shape", pa.list_(pa.int64()), nullable=False),
    pa.field("data", pa.binary(), nullable=False),
]), "kernbench-outputs")

#: access.parquet: the arrays indexed ops refer to by id (``{"access": N}``, ``{"mask": N}``,
#: ``{"values": N}`` in attrs): offsets (int64), masks (bool, bit-packed little-endian bit
#: order) and const values (the op's dtype), little-endian, one row per distinct array
ACCESS = _with_meta(pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),
    pa.field("dtype", pa.string(), nullable=False),
    pa.field("shape", pa.list_(pa.int64()), nullable=False),
    pa.field("data", pa.binary(), nullable=False),
]), "kernbench-access")

SCHEMAS: dict[str, pa.Schema] = {
    "kernbench-ops": OPS,
    "kernbench-access": ACCESS,
    "kernbench-tensors": TENSORS,
    "kernbench-values": VALUES,
    "kernbench-outputs": OUTPUTS,
}


def check_metadata(metadata: dict | None, fmt: str, where: str | Path) -> None:
    """Raise TraceFormatError unless ``metadata`` names format ``fmt`` at a supported version."""
    raw = (metadata or {}).get(META_KEY)
    if raw is None:
        raise TraceFormatError(f"{where}: no 'kernbench' schema metadata; not a kernbench file")
    try:
        meta = json.loads(raw)
        found_fmt, version = meta["format"], meta["schema_version"]
        major = int(str(version).split(".")[0])
    except (ValueError, KeyError, TypeError):
        raise TraceFormatError(f"{where}: unreadable 'kernbench' metadata {raw[:80]!r}") from None
    if found_fmt != fmt:
        raise TraceFormatError(f"{where}: format {found_fmt!r}, expected {fmt!r}")
    if major != SUPPORTED_MAJOR:
        raise TraceFormatError(
            f"{where}: schema_version {version!r} is not supported "
            f"(this kernbench reads major version {SUPPORTED_MAJOR})"
        )


def read_table(path: str | Path, fmt: str) -> pa.Table:
    """Read a trace Parquet file, checking its schema metadata and columns first."""
    path = Path(path)
    if not path.is_file():
        raise TraceFormatError(f"{path}: missing")
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(f"{path}: not a readable Parquet file ({exc})") from None
    check_metadata(schema.metadata, fmt, path)
    expected = SCHEMAS[fmt]
    missing = [n for n in expected.names if n not in schema.names]
    if missing:
        raise TraceFormatError(f"{path}: missing columns {missing}")
    try:
        return pf.read()
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(f"{path}: corrupt Parquet data ({exc})") from None
