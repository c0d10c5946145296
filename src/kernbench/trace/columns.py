"""Arrow columns as numpy arrays, without ``pyarrow.compute`` (ADR-0630).

The replay child reads every trace through these: validity masks and integer values come
straight from the Arrow buffers, string columns become (distinct values, per-row codes)
from a dictionary column's own dictionary or Arrow's dictionary encoding. The few Arrow
kernels needed (``dictionary_encode``, ``take``) are called through ``pyarrow._compute``:
importing ``pyarrow.compute`` costs a process ~0.05-0.08 s of Python wrappers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["array", "byte_lengths", "chunk", "distinct", "ints", "list_parts", "nulls",
           "strings", "take", "unique_rows"]

def chunk(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of a (possibly chunked) column."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        return col.combine_chunks() if col.num_chunks else pa.array([], col.type)
    return col


def array(values: np.ndarray, type: pa.DataType) -> pa.Array:
    """A numpy array of a fixed-width numeric type as an Arrow array without nulls
    (``pa.array`` on a numpy array would import ``numpy.ma``, ~0.05 s)."""
    data = np.ascontiguousarray(values, dtype=np.dtype(type.to_pandas_dtype()))
    return pa.Array.from_buffers(type, len(data), [None, pa.py_buffer(data)])


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an array (``np.unique`` without index outputs imports
    ``numpy.ma`` to ask whether the array is masked)."""
    flat = np.sort(values, axis=None)
    if not len(flat):
        return flat
    return flat[np.concatenate([[True], flat[1:] != flat[:-1]])]


def take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """The rows ``rows`` of ``table``, in that order."""
    return _call("take", [table, array(rows, pa.int64())])


def _call(name: str, args: list) -> Any:
    """Arrow's compute function ``name``: through ``pyarrow._compute`` when there is one, so
    a process need not import ``pyarrow.compute`` (~0.05 s of Python wrappers) for it."""
    try:
        from pyarrow._compute import call_function
    except ImportError:  # pragma: no cover - another pyarrow layout
        from pyarrow.compute import call_function
    return call_function(name, args)


def _bits(buf: pa.Buffer, offset: int, n: int) -> np.ndarray:
    raw = np.frombuffer(buf, np.uint8)
    return np.unpackbits(raw, bitorder="little", count=offset + n)[offset:].astype(bool)


def nulls(arr: pa.Array) -> np.ndarray:
    """True where ``arr`` is null (its own validity, not its parent's)."""
    n = len(arr)
    if not arr.null_count:
        return np.zeros(n, bool)
    if pa.types.is_null(arr.type):
        return np.ones(n, bool)
    buf = arr.buffers()[0]
    if buf is None:  # pragma: no cover - a union or dictionary reports nulls elsewhere
        return np.zeros(n, bool)
    return ~_bits(buf, arr.offset, n)


def ints(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer or boolean column as int64 (0 where null: see ``nulls``)."""
    arr = chunk(col)
    n = len(arr)
    if not n:
        return np.zeros(0, np.int64)
    if not arr.null_count:
        return np.asarray(arr.to_numpy(zero_copy_only=False)).astype(np.int64, copy=False)
    buf = arr.buffers()[1]
    if pa.types.is_boolean(arr.type):
        vals = _bits(buf, arr.offset, n).astype(np.int64)
    else:
        dtype = np.dtype(arr.type.to_pandas_dtype())
        vals = np.frombuffer(buf, dtype)[arr.offset:arr.offset + n].astype(np.int64)
    vals[nulls(arr)] = 0
    return vals


def byte_lengths(col: pa.Array | pa.ChunkedArray) -> list[int | None]:
    """The byte length of each value of a binary or string column (None where null); the
    bytes themselves are never copied."""
    arr = chunk(col)
    n = len(arr)
    t = arr.type
    if n and (pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t)
              or pa.types.is_large_string(t)):
        wide = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
        off = np.frombuffer(arr.buffers()[1], np.int64 if wide else np.int32)
        lens: list[int | None] = np.diff(off[arr.offset:arr.offset + n + 1]).tolist()
    else:  # a view type: each value's own length
        lens = [None if v is None else len(v) for v in arr.to_pylist()]
    for i in np.flatnonzero(nulls(arr)).tolist():
        lens[i] = None
    return lens


def list_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """A list column as (start, length, values): row ``i`` holds ``values[start[i]:][:length[i]]``;
    a null row has length 0."""
    off = ints(arr.offsets)
    lens = np.diff(off)
    if arr.null_count:
        lens[nulls(arr)] = 0
    return off[:-1], lens, arr.values


def strings(col: pa.Array | pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """A string (or dictionary of strings) column as (values, per-row codes into them), code
    -1 where null. Values are distinct, in order of first appearance, for a plain column
    (Arrow's hash encoding); a dictionary column's own dictionary may repeat one."""
    arr = chunk(col)
    if not pa.types.is_dictionary(arr.type):
        try:
            arr = _call("dictionary_encode", [arr])
        except pa.ArrowException:  # a type Arrow does not encode (a view): one dict here
            items = arr.to_pylist()
            seen = {v: k for k, v in enumerate(v for v in dict.fromkeys(items) if v is not None)}
            code = {**seen, None: -1}
            return list(seen), np.fromiter(map(code.__getitem__, items), np.int64, len(items))
    values = arr.dictionary.to_pylist()
    codes = ints(arr.indices)
    codes[nulls(arr.indices)] = -1
    if None in values:
        codes[np.isin(codes, [k for k, v in enumerate(values) if v is None])] = -1
    return [v if v is not None else "" for v in values], codes


def unique_rows(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, index of each row's distinct row) of an int64 matrix, by one sort.
    Distinct rows come in lexicographic order."""
    if not len(mat):
        return mat, np.zeros(0, np.int64)
    cols = np.ascontiguousarray(mat.T)  # column reductions and arithmetic in cache order
    lo = cols.min(axis=1).tolist()
    span = [h - low + 1 for low, h in zip(lo, cols.max(axis=1).tolist(), strict=True)]
    total = 1
    for s in span:
        total *= s
    if total < 1 << 62:  # the row as one mixed-radix integer: a 1-D sort
        key = np.zeros(len(mat), np.int64)
        for j, s in enumerate(span):
            if s > 1:  # a constant column adds nothing to the key
                key *= s
                key += cols[j]
                key -= lo[j]
        # equal keys are equal rows: any of them stands for its group, so the sort need
        # not be stable; groups come in key order, which is lexicographic row order
        order = np.argsort(key)
        srt = key[order]
        return _grouped(mat, order, srt[1:] != srt[:-1])
    order = np.lexsort(mat.T[::-1])
    srt = mat[order]
    return _grouped(mat, order, (srt[1:] != srt[:-1]).any(axis=1))


def _grouped(mat: np.ndarray, order: np.ndarray, starts: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """``unique_rows``'s answer from a sort ``order`` of ``mat``'s rows and where, after the
    first, a new group starts in that order."""
    new = np.ones(len(order), dtype=bool)
    new[1:] = starts
    inverse = np.empty(len(order), np.int64)
    inverse[order] = np.cumsum(new) - 1
    return mat[order[new]], inverse
