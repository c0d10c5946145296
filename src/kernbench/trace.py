"""A trace directory: manifest, verified reading. Reading never runs code. (Atomic creation
lives in ``kernbench.atomic``; ``atomic_dir`` is re-exported here.)"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from kernbench.atomic import atomic_dir
from kernbench.errors import TraceFormatError
from kernbench.schemas.arrow import SUPPORTED_MAJOR, read_table

DATA_FILES = ("ops.parquet", "tensors.parquet")
__all__ = ["DATA_FILES", "Trace", "atomic_dir", "file_sha256", "read_manifest", "verify_files"]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(path: Path) -> dict[str, Any]:
    mpath = Path(path) / "manifest.json"
    if not Path(path).is_dir():
        raise TraceFormatError(f"{path}: not a trace directory")
    if not mpath.is_file():
        raise TraceFormatError(f"{path}: no manifest.json; not a trace")
    try:
        manifest = json.loads(mpath.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{mpath}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "kernbench-trace":
        raise TraceFormatError(f"{mpath}: not a kernbench trace manifest")
    version = manifest.get("schema_version")
    try:
        major = int(str(version).split(".")[0])
    except ValueError:
        major = None
    if major != SUPPORTED_MAJOR:
        raise TraceFormatError(f"{mpath}: schema_version {version!r} is not supported "
                               f"(this kernbench reads major version {SUPPORTED_MAJOR})")
    return manifest


def verify_files(path: Path, manifest: dict[str, Any]) -> None:
    """Check every data file exists and matches the manifest's sha256."""
    files = manifest.get("files") or {}
    for name in DATA_FILES:
        f = Path(path) / name
        if not f.is_file():
            raise TraceFormatError(f"{f}: missing")
        want = files.get(name)
        if want is None or file_sha256(f) != want:
            raise TraceFormatError(f"{f}: sha256 does not match the manifest; the trace was "
                                   "modified or is corrupt")


class Trace:
    """An opened trace directory. ``ops``/``tensors`` are polars DataFrames.

    ``Trace(path)`` opens and verifies a directory as ``Trace.open(path)`` does."""

    def __init__(self, path: str | Path, manifest: dict[str, Any] | None = None,
                 verify: bool = True) -> None:
        self.path = Path(path)
        if manifest is None:
            manifest = read_manifest(self.path)
            if verify:
                verify_files(self.path, manifest)
        self.manifest = manifest

    @classmethod
    def open(cls, path: str | Path, verify: bool = True) -> Trace:
        path = Path(path)
        manifest = read_manifest(path)
        if verify:
            verify_files(path, manifest)
        return cls(path, manifest)

    @cached_property
    def ops_table(self) -> pa.Table:
        return read_table(self.path / "ops.parquet", "kernbench-ops")

    @cached_property
    def tensors_table(self) -> pa.Table:
        return read_table(self.path / "tensors.parquet", "kernbench-tensors")

    @property
    def ops(self) -> pl.DataFrame:
        return pl.from_arrow(self.ops_table)  # type: ignore[return-value]

    @property
    def tensors(self) -> pl.DataFrame:
        return pl.from_arrow(self.tensors_table)  # type: ignore[return-value]

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

        return trace_html(self)
