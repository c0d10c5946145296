"""Arrow schemas of every trace file: the single source of truth for the trace format.

Each written file carries schema-level metadata key ``kernbench`` =
``{"format": ..., "schema_version": ...}``; readers reject an unknown major version.
"""

from __future__ import annotations

import json

import pyarrow as pa

#: the schema version of every file's own metadata (each file format is at version 1)
SCHEMA_VERSION = 1
SUPPORTED_MAJOR = 1
#: the manifest's ``schema_version``: 1, or 2 when the trace uses indexed memory (an
#: ``access.parquet``, or an op of ``ops.VERSION_2``), or 3 when it holds an operand of a
#: version-3 dtype (``dtypes.V3_DTYPES``: int64, uint32 ...) or a bitcast (ADR-0580); readers
#: accept all three (docs/trace-format)
MANIFEST_VERSION_INDEXED = 2
MANIFEST_VERSION_WIDE = 3
MANIFEST_MAJORS = (1, 2, 3)
#: a trace holding a ``guard`` row (a guarded path, ADR-0840) is minor version 1 of its
#: major: the manifest says ``"MAJOR.1"`` (a string); a reader of the major reads it, and
#: one that predates guards reports the op name it does not know (docs/trace-format.md)
GUARD_MINOR = 1


def manifest_version(major: int, minor: int = 0) -> int | str:
    """The manifest's ``schema_version``: the major alone (an int, as every trace before
    guards), or ``"MAJOR.MINOR"``."""
    return major if not minor else f"{major}.{minor}"


def version_parts(version: object) -> tuple[int, int]:
    """(major, minor) of a manifest's ``schema_version`` (an int or ``"MAJOR.MINOR"``);
    ValueError when it is neither."""
    if isinstance(version, bool) or not isinstance(version, int | str):
        raise ValueError(f"schema_version {version!r} is not a version")
    head, _, tail = str(version).partition(".")
    return int(head), int(tail) if tail else 0
#: the attrs of a bitcast ``cast`` row contain this (canonical JSON: sorted keys, no spaces)
BITCAST_ATTR = '"bitcast":true'
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

#: the shared parts an op can wait for (``shared.parquet``'s ``part``), in dictionary order:
#: the control processor's issue, the HBM stack, the PE's TCM port, a link
SHARED_PARTS = ("issue", "hbm", "tcm", "link")

#: shared.parquet: how long each shared part delayed an op, only where it did (wait_ps > 0;
#: an op may have several rows): for ``issue``, how much later than its program wanted the
#: op was issued; for ``hbm``, ``tcm`` and ``link``, how much later than its own cost the op
#: ended. ``resource`` names the part's instance: ``issue.pe0``, ``hbm.ch3``, ``tcm.pe2``,
#: ``link.pe3->pe4``. Written only by traces recorded on hardware with a shared part.
SHARED = _with_meta(pa.schema([
    pa.field("op_id", pa.int64(), nullable=False),
    pa.field("part", _dict_str, nullable=False),
    pa.field("resource", pa.string(), nullable=False),
    pa.field("wait_ps", pa.int64(), nullable=False),
]), "kernbench-shared")

#: the calls of a program to the machine that are not rows of the op log
#: (``stream.parquet``'s ``kind``, docs/trace-format.md "The op stream"), in dictionary order
STREAM_KINDS = ("alloc", "release", "wait", "resolve", "recv_async", "send", "access",
                "loop", "next", "end", "lifetime", "lifetime_end", "auto_tile", "hw", "work")

#: stream.parquet: what ``retime`` needs besides the op log to issue a program's ops again
#:: each event of a program at ``seq`` (its PE's row count when it happened: it
#: comes before the program's first row of a higher ``seq``), ``args`` its integers and
#: ``src`` its source line (an allocation's) or the hardware field read (``hw``). A ``work``
#: event is the work a row's cost model read where it is not the row's own count.
STREAM = _with_meta(pa.schema([
    pa.field("program", pa.int32(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("kind", _dict_str, nullable=False),
    pa.field("args", pa.list_(pa.int64()), nullable=False),
    pa.field("src", _dict_str, nullable=True),
]), "kernbench-stream")

SCHEMAS: dict[str, pa.Schema] = {
    "kernbench-ops": OPS,
    "kernbench-stream": STREAM,
    "kernbench-access": ACCESS,
    "kernbench-shared": SHARED,
    "kernbench-tensors": TENSORS,
    "kernbench-values": VALUES,
    "kernbench-outputs": OUTPUTS,
}
