"""The one door to a trace's Parquet files: every reader of ``ops``, ``tensors``,
``outputs`` and ``values`` Parquet opens it here, once per command.

``open_parquet`` checks the footer before any data is allocated (a regular file, UTF-8
schema metadata, the ``kernbench`` format and major version, every column with its contract
type, the uncompressed size within ``kernbench.trace.limits``, as the footer and as the
page headers say: ``kernbench.trace.pages``); ``read``, ``batches`` and
``scan`` then read the opened file, turning a corrupt page into ``TraceFormatError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.errors import TraceFormatError
from kernbench.schemas.arrow import META_KEY, SCHEMAS, SUPPORTED_MAJOR
from kernbench.trace import limits
from kernbench.trace.pages import decoded_bytes

if TYPE_CHECKING:
    import polars as pl

#: what a broken Parquet file raises from pyarrow, as TraceFormatError here
READ_ERRORS = (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError,
               OverflowError, MemoryError)


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


def _base(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _same_type(have: pa.DataType, want: pa.DataType) -> bool:
    have, want = _base(have), _base(want)
    for group in ((pa.types.is_string, pa.types.is_large_string),
                  (pa.types.is_binary, pa.types.is_large_binary)):
        if any(g(want) for g in group):
            return any(g(have) for g in group) or have == pa.string_view()
    if pa.types.is_list(want):
        return ((pa.types.is_list(have) or pa.types.is_large_list(have))
                and _same_type(have.value_type, want.value_type))
    if pa.types.is_struct(want):
        if not pa.types.is_struct(have):
            return False
        names = [have.field(i).name for i in range(have.num_fields)]
        return all(f.name in names and _same_type(have.field(f.name).type, f.type)
                   for f in want)
    return have == want


def check_types(schema: pa.Schema, fmt: str, where: str | Path) -> None:
    """Every column of the format's Arrow schema is present with its contract type."""
    expected = SCHEMAS[fmt]
    missing = [n for n in expected.names if n not in schema.names]
    if missing:
        raise TraceFormatError(f"{where}: missing columns {missing}")
    for f in expected:
        have = schema.field(f.name).type
        if not _same_type(have, f.type):
            raise TraceFormatError(f"{where}: column {f.name!r} is {have}, expected {f.type}")


def open_parquet(path: Path, fmt: str) -> pq.ParquetFile:
    """Open a trace Parquet file and check its footer: a regular file, the ``kernbench``
    JSON metadata, every column with its type, the uncompressed size within the budget."""
    if not path.is_file():
        raise TraceFormatError(f"{path}: missing or not a regular file")
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        meta = pf.metadata
        raw = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    except READ_ERRORS as exc:
        msg = " ".join(str(exc).split())[:200]
        raise TraceFormatError(f"{path}: not a readable Parquet file ({msg})") from None
    for key, value in (meta.metadata or {}).items():
        try:
            key.decode(), value.decode()
        except UnicodeDecodeError:
            raise TraceFormatError(f"{path}: schema metadata {key[:40]!r} is not UTF-8 text; "
                                   "not a kernbench file") from None
    check_metadata(schema.metadata, fmt, path)
    check_types(schema, fmt, path)
    limits.require(f"{path} (uncompressed)", raw)
    # the page headers size the decompression buffers, whatever the footer says
    limits.require(f"{path} (decoded pages)", decoded_bytes(path, meta))
    return pf


def read(pf: pq.ParquetFile, path: Path, columns: list[str] | None = None) -> pa.Table:
    """The file's rows (``columns`` of them), decoded whole."""
    try:
        return pf.read(columns=columns)
    except READ_ERRORS as exc:
        msg = " ".join(str(exc).split())[:200]
        raise TraceFormatError(f"{path}: corrupt Parquet data ({msg})") from None


def batches(pf: pq.ParquetFile, path: Path, batch_rows: int,
            columns: list[str] | None = None, row_groups: list[int] | None = None
            ) -> Iterator[pa.RecordBatch]:
    """The file's rows as record batches of ``batch_rows`` rows (bounded memory)."""
    try:
        yield from pf.iter_batches(batch_size=batch_rows, columns=columns,
                                   row_groups=row_groups)
    except READ_ERRORS as exc:
        msg = " ".join(str(exc).split())[:200]
        raise TraceFormatError(f"{path}: corrupt Parquet data ({msg})") from None


def read_table(path: Path, fmt: str) -> pa.Table:
    """A whole trace Parquet file of format ``fmt``, its footer checked first."""
    path = Path(path)
    return read(open_parquet(path, fmt), path)


def scan(path: Path, fmt: str) -> pl.LazyFrame:
    """A lazy polars scan of a trace Parquet file, its footer checked first."""
    path = Path(path)
    open_parquet(path, fmt)
    import polars as pl

    return pl.scan_parquet(path)
