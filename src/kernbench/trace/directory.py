"""A trace directory: manifest, verified reading. Reading never runs code. (Atomic creation
lives in ``kernbench.trace.atomic``; ``atomic_dir`` is re-exported here.)"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.errors import TraceFormatError
from kernbench.schemas.arrow import MANIFEST_MAJORS, META_KEY, SHARED, version_parts
from kernbench.schemas.elements import AccessTable
from kernbench.trace.atomic import atomic_dir
from kernbench.trace.limits import MANIFEST_MAX_BYTES, TraceLimitError
from kernbench.trace.parquet import open_parquet, read_table

if TYPE_CHECKING:  # the validator is imported when a trace is first read
    import polars as pl

    from kernbench.trace.validate import Validation

DATA_FILES = ("ops.parquet", "tensors.parquet")
#: data files a trace has only when it uses them (listed in the manifest's ``files`` then):
#: the arrays of indexed ops, and the waits on the chip's shared parts
OPTIONAL_FILES = ("access.parquet", "shared.parquet", "stream.parquet")
#: the lowest manifest version that may list an optional file (any, if not named here)
FIRST_VERSION = {"access.parquet": 2}
__all__ = ["DATA_FILES", "OPTIONAL_FILES", "Trace", "atomic_dir", "file_sha256",
           "read_manifest", "verify_files"]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_bounded(mpath: Path) -> str:
    """The manifest's text, refusing anything but a small regular file."""
    try:
        if mpath.stat().st_size > MANIFEST_MAX_BYTES:
            raise TraceLimitError(f"{mpath}: larger than {MANIFEST_MAX_BYTES} bytes; not a "
                                  "kernbench manifest")
        with open(mpath, "rb") as f:
            raw = f.read(MANIFEST_MAX_BYTES + 1)
    except OSError as exc:
        raise TraceFormatError(f"{mpath}: unreadable ({exc.strerror or exc})") from None
    if len(raw) > MANIFEST_MAX_BYTES:
        raise TraceLimitError(f"{mpath}: larger than {MANIFEST_MAX_BYTES} bytes")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise TraceFormatError(f"{mpath}: not UTF-8 text") from None


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of a trace directory, every field checked (``kernbench.trace.validate``)."""
    mpath = Path(path) / "manifest.json"
    if not Path(path).is_dir():
        raise TraceFormatError(f"{path}: not a trace directory")
    if not mpath.is_file():
        raise TraceFormatError(f"{path}: no manifest.json; not a trace")
    try:
        manifest = json.loads(_read_bounded(mpath))
    except (ValueError, RecursionError) as exc:
        raise TraceFormatError(f"{mpath}: not valid JSON ({str(exc)[:100]})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "kernbench-trace":
        raise TraceFormatError(f"{mpath}: not a kernbench trace manifest")
    version = manifest.get("schema_version")
    try:
        major: int | None = version_parts(version)[0]
    except ValueError:
        major = None
    if major not in MANIFEST_MAJORS:
        raise TraceFormatError(f"{mpath}: schema_version {_short_repr(version)} is not "
                               f"supported (this kernbench reads major versions "
                               f"{', '.join(map(str, MANIFEST_MAJORS))})")
    from kernbench.trace.validate import check_manifest

    check_manifest(manifest, str(mpath))
    check_version_files(Path(path), manifest, int(major))
    return manifest


def check_version_files(path: Path, manifest: dict[str, Any], major: int) -> None:
    """The manifest's version against the files present: a version-1 trace lists no
    version-2 file, and no optional data file is present without being listed (ADR-0539)."""
    files = manifest.get("files") or {}
    for name in OPTIONAL_FILES:
        first = FIRST_VERSION.get(name, 1)
        if name in files and major < first:
            raise TraceFormatError(f"{path}: the manifest says schema_version {major} but "
                                   f"lists {name}, a version-{first} file")
        if name not in files and os.path.lexists(path / name):
            raise TraceFormatError(f"{path / name}: present but not listed in the manifest's "
                                   "files; the trace was modified or is corrupt")


def verify_files(path: Path, manifest: dict[str, Any]) -> None:
    """Check every data file is a regular file matching the manifest's sha256."""
    files = manifest.get("files") or {}
    for name in DATA_FILES + tuple(n for n in OPTIONAL_FILES if n in files):
        f = Path(path) / name
        if not f.is_file():
            raise TraceFormatError(f"{f}: missing or not a regular file")
        want = files.get(name)
        try:
            same = want is not None and file_sha256(f) == want
        except OSError as exc:
            raise TraceFormatError(f"{f}: unreadable ({exc.strerror or exc})") from None
        if not same:
            raise TraceFormatError(f"{f}: sha256 does not match the manifest; the trace was "
                                   "modified or is corrupt")


def _own_metadata(table: pa.Table) -> pa.Table:
    """``table`` with only the ``kernbench`` schema metadata: other keys (``pandas``, ...)
    are foreign to a trace and some readers would parse them."""
    return table.replace_schema_metadata({META_KEY: table.schema.metadata[META_KEY]})


class Trace:
    """An opened trace directory. ``ops``/``tensors`` are polars DataFrames.

    ``Trace(path)`` opens and verifies a directory as ``Trace.open(path)`` does. Opening
    checks the manifest (every field, the hardware, its memory) and the sha256 of each data
    file. The rows are validated (``kernbench.trace.validate``) once, before the first read of a
    table or by ``validated()``: an unreadable trace raises ``TraceFormatError``; an invalid
    one too when ``strict`` (every command but ``check``, which lists the findings from
    ``validation``).
    """

    def __init__(self, path: str | Path, manifest: dict[str, Any] | None = None,
                 verify: bool = True, strict: bool = True) -> None:
        self.path = Path(path)
        if manifest is None:
            manifest = read_manifest(self.path)
            if verify:
                verify_files(self.path, manifest)
        self.manifest = manifest
        self.strict = strict

    @classmethod
    def open(cls, path: str | Path, verify: bool = True, strict: bool = True) -> Trace:
        path = Path(path)
        manifest = read_manifest(path)
        if verify:
            verify_files(path, manifest)
        return cls(path, manifest, strict=strict)

    @cached_property
    def validation(self) -> Validation:
        """What the validator found in the rows (raises if the files cannot be read)."""
        from kernbench.trace.validate import validate_trace

        return validate_trace(self.path, self.manifest, int(self.manifest["hw"]["n_pe"]))

    def validated(self) -> Trace:
        """This trace, once validated; TraceFormatError if it is invalid and ``strict``."""
        validation = self.validation  # computed (and unreadable files refused) either way
        if self.strict and not validation.ok:
            raise TraceFormatError(self.validation.summary(str(self.path)))
        return self

    @cached_property
    def ops_table(self) -> pa.Table:
        read = self.validated().validation.ops  # a small file: the validator's rows
        if read is None:
            read = read_table(self.path / "ops.parquet", "kernbench-ops")
        return _own_metadata(read)

    @cached_property
    def tensors_table(self) -> pa.Table:
        read = self.validated().validation.tensors  # the file is read once
        if read is None:
            read = read_table(self.path / "tensors.parquet", "kernbench-tensors")
        return _own_metadata(read)

    @cached_property
    def shared_table(self) -> pa.Table:
        """``shared.parquet`` as the validator read it: how long each shared part delayed
        an op (no rows when the trace has none: nothing waited, or the hardware shares
        nothing)."""
        read = self.validated().validation.shared
        return SHARED.empty_table() if read is None else _own_metadata(read)

    @property
    def shared(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame(self.shared_table)

    @property
    def access(self) -> AccessTable:
        """The arrays of ``access.parquet`` by id (empty when the trace has none), as the
        validator read them."""
        return self.validated().validation.access

    @cached_property
    def ops_file(self) -> pq.ParquetFile:
        """``ops.parquet`` opened, its footer checked, for streaming: the handle the validator
        opened, so a replay (which reads the rows through it) opens the file once."""
        opened = self.validated().validation.ops_file
        return opened if opened is not None else open_parquet(self.path / "ops.parquet",
                                                              "kernbench-ops")

    @property
    def ops(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame(self.ops_table)

    @property
    def tensors(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame(self.tensors_table)

    @property
    def n_ops(self) -> int:
        return int(self.manifest["n_ops"])

    @property
    def t_end_ps(self) -> int:
        return int(self.manifest["t_end_ps"])

    def __repr__(self) -> str:
        return f"Trace({str(self.path)!r}, case={self.manifest.get('case')!r}, n_ops={self.n_ops})"

    def _repr_html_(self) -> str:
        from kernbench.notebook import trace_html
        from kernbench.trace.replayed import replay_status

        replay = None
        if (self.path / "replay").exists():
            stale = replay_status(self.path, self.manifest)
            replay = "this trace's replay" if stale is None else f"ignored: {stale}"
        return trace_html(self, replay)

