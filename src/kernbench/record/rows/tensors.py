"""``tensors.parquet``: the case's HBM tensors, their placement and how to initialise them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from kernbench.case import Case
from kernbench.record.handle import HbmTensor
from kernbench.schemas.arrow import TENSORS
from kernbench.trace import writing

#: above this many bytes of ``kb.data`` contents the file is written for speed (the small
#: files, every golden among them, keep the settings they always had: byte-identical)
LARGE_DATA = 1 << 20


def write_tensors(path: Path, case: Case, tensors: dict[str, HbmTensor]) -> None:
    """One row per tensor; raw bytes only for ``kb.data`` inits (others are regenerated)."""
    rows = {f: [] for f in TENSORS.names}  # type: ignore[var-annotated]
    for name, spec in case.tensors.items():
        t = tensors[name]
        rows["name"].append(name)
        rows["role"].append(spec.role)
        rows["pe"].append(t.pe)
        rows["addr"].append(t.addr)
        rows["dtype"].append(spec.dtype.name)
        rows["shape"].append(list(spec.shape))
        rows["init"].append(spec.init.to_json())
        rows["data"].append(_c_bytes(spec.init.storage_view(spec.shape, spec.dtype))
                            if spec.init.kind == "data" else None)
    table = pa.Table.from_pydict(rows, schema=TENSORS)
    large = sum(len(b) for b in rows["data"] if b) > LARGE_DATA
    writing.write_table(table, path, "tensors-large" if large else "tensors")


def _c_bytes(a: np.ndarray) -> memoryview:
    """``a.tobytes()`` without the copy where ``a`` is C-contiguous already: a byte view."""
    return np.ascontiguousarray(a).data.cast("B")
