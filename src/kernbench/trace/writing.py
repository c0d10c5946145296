"""The one door every Parquet file kernbench writes goes through (``trace/parquet.py`` is the
one it is read through): a trace's ``ops``, ``access``, ``shared``, ``tensors``, replay's
``values`` and ``outputs``, a sweep's ``points`` and the panel's table.

Each file has a ``Profile`` in ``PROFILES``: its compression, level, dictionary columns and
statistics, chosen here once. The schema metadata (the ``kernbench`` format and version) is
the Arrow schema's own (``schemas/arrow.py``) and is always stored with the file.
``tests/trace/test_writing.py`` checks that no other module calls a Parquet write function.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import polars as pl

__all__ = ["PROFILES", "Codec", "Profile", "open_writer", "write_frame", "write_table"]

#: the compression codecs both writers (pyarrow's and polars') name the same way
Codec = Literal["zstd", "lz4", "snappy", "gzip", "brotli"]


@dataclass(frozen=True, slots=True)
class Profile:
    """How one kind of file is written. ``dictionary``: True, False or the columns to
    dictionary-encode; ``level``: the codec's level (None: its default)."""

    compression: Codec = "zstd"
    level: int | None = None
    dictionary: bool | tuple[str, ...] = True
    statistics: bool = True


#: ops.parquet: the repeated strings dictionary-encoded, no statistics (the golden traces'
#: bytes depend on these options: change them and every golden changes)
_OPS = Profile(dictionary=("kind", "name", "engine", "src", "attrs",
                           "inputs.list.element.space", "inputs.list.element.dtype",
                           "output.space", "output.dtype"), statistics=False)

PROFILES: dict[str, Profile] = {
    "ops": _OPS,
    "access": Profile(statistics=False),
    "shared": Profile(statistics=False),
    "stream": Profile(statistics=False),
    "tensors": Profile(),
    # array contents: no dictionary and no min/max statistics of megabyte-long values (each
    # costs seconds at 100 MB), and lz4, which squeezes zeros and passes random floats
    # through at memory speed (zstd level 1: 4x slower, 10% smaller)
    "tensors-large": Profile("lz4", dictionary=False, statistics=False),
    "values": Profile(level=1),
    # one binary value per output: min/max statistics and a dictionary would copy and
    # compare the whole array (10x the write time of a large output)
    "outputs": Profile(level=1, dictionary=False, statistics=False),
    "points": Profile(statistics=False),
    "panel": Profile(),
}


def _options(kind: str) -> dict[str, Any]:
    p = PROFILES[kind]
    opts: dict[str, Any] = {"compression": p.compression}
    if p.level is not None:
        opts["compression_level"] = p.level
    if p.dictionary is not True:
        opts["use_dictionary"] = list(p.dictionary) if p.dictionary else False
    if not p.statistics:
        opts["write_statistics"] = False
    return opts


def open_writer(path: str | Path, schema: pa.Schema, kind: str, **extra: Any
                ) -> pq.ParquetWriter:
    """A ``ParquetWriter`` of ``kind``'s profile, storing ``schema`` and its metadata
    (``extra``: pyarrow-only options such as ``memory_pool``)."""
    return pq.ParquetWriter(path, schema, store_schema=True, **_options(kind), **extra)


def discard(writer: pq.ParquetWriter | None) -> None:
    """Close ``writer`` on a failure path (the atomic folder it writes into is dropped): an
    error while closing is not the one to report."""
    if writer is None:
        return
    try:
        writer.close()
    except Exception:  # noqa: BLE001 - best effort on the failure path
        pass


def write_table(table: pa.Table, path: str | Path, kind: str) -> None:
    """Write ``table`` whole with ``kind``'s profile."""
    pq.write_table(table, path, **_options(kind))


def write_frame(frame: pl.DataFrame, kind: str, path: str | Path | None = None) -> bytes:
    """Write a polars frame with ``kind``'s profile to ``path``, or return the file's bytes
    (``path`` None: the caller places them, e.g. atomically)."""
    p = PROFILES[kind]
    buf: Any = io.BytesIO() if path is None else path
    frame.write_parquet(buf, compression=p.compression,
                        compression_level=p.level, statistics=p.statistics)
    return buf.getvalue() if path is None else b""
