"""The trace directory both phases read: ``Trace`` (open, verified reading), the one Parquet
door (``trace.parquet``), the one validator and its row rules, limits, atomic replacement,
and the hardware config stored whole in every trace (``trace.hw``)."""

from __future__ import annotations

from kernbench.trace.atomic import atomic_dir
from kernbench.trace.directory import (
    DATA_FILES,
    OPTIONAL_FILES,
    Trace,
    file_sha256,
    read_manifest,
    verify_files,
)

__all__ = ["DATA_FILES", "OPTIONAL_FILES", "Trace", "atomic_dir", "file_sha256", "read_manifest",
           "verify_files"]
