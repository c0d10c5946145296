"""An optional file of a trace beside ``ops.parquet`` (``shared.parquet``,
``stream.parquet``): read through the one door only when the manifest lists it, its row
count capped before anything is decoded, and its rows refused at the first that breaks the
format, in one line naming the row."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.errors import TraceFormatError
from kernbench.trace import limits
from kernbench.trace.columns import nulls
from kernbench.trace.parquet import open_parquet, read


def read_capped(path: Path, manifest: dict[str, Any], file: str, fmt: str, cap: int,
                too_many: Callable[[int], str]) -> tuple[pa.Table, Path] | None:
    """``file`` of the trace at ``path`` and where it is (None when the manifest lists
    none); TraceLimitError ``"{where}: " + too_many(rows)`` past ``cap`` rows."""
    if file not in (manifest.get("files") or {}):
        return None
    where = Path(path) / file
    pf = open_parquet(where, fmt)
    rows = pf.metadata.num_rows
    if rows > cap:
        raise limits.TraceLimitError(f"{where}: {too_many(rows)}")
    return read(pf, where), where


def refuse_nulls(cols: Mapping[str, pa.Array], names: Iterable[str], where: Path) -> None:
    """TraceFormatError naming the first row with a null in one of ``names`` (a dictionary
    column by its indices)."""
    for name in names:
        col = cols[name]
        null = nulls(col.indices if pa.types.is_dictionary(col.type) else col)
        refuse(null, where, f"has a null {name}")


def refuse(bad: np.ndarray, where: Path, says: str | Callable[[int], str]) -> None:
    """TraceFormatError ``"{where}: row k " + says`` (or ``says(k)``, built only then) for
    the first row ``k`` that is ``bad``, if any."""
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(f"{where}: row {k} {says if isinstance(says, str) else says(k)}")
