"""Arrow columns as numpy arrays, without ``pyarrow.compute`` (ADR-0630).

The replay child reads every trace through these: validity masks and integer values come
straight from the Arrow buffers, string columns become (distinct values, per-row codes)
from a dictionary column's own dictionary or, for a plain string column, from one numpy
sort of its fixed-width bytes (short strings) or a dict (long ones). Exact: no hashing.
Importing ``pyarrow.compute`` costs a process ~0.08 s; these cost only numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["array", "byte_lengths", "chunk", "distinct", "ints", "list_parts", "nulls",
           "strings", "take", "unique_rows"]

#: plain strings up to this many bytes are factorized in numpy (longer: a Python dict)
SHORT_BYTES = 24


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
    -1 where null. Values are distinct for a plain column; a dictionary's may repeat."""
    arr = chunk(col)
    if pa.types.is_dictionary(arr.type):
        values = arr.dictionary.to_pylist()
        codes = ints(arr.indices)
        codes[nulls(arr.indices)] = -1
        if None in values:
            codes[np.isin(codes, [k for k, v in enumerate(values) if v is None])] = -1
        return [v if v is not None else "" for v in values], codes
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        got = _short_strings(arr)
        if got is not None:
            return got
    items = arr.to_numpy(zero_copy_only=False).tolist()
    values = [v for v in dict.fromkeys(items) if v is not None]  # in order of appearance
    code: dict[str | None, int] = {v: k for k, v in enumerate(values)}
    code[None] = -1
    return values, np.fromiter(map(code.__getitem__, items), np.int64, len(items))


def _short_strings(arr: pa.Array) -> tuple[list[str], np.ndarray] | None:
    """Factorize a plain string array whose strings are all short (None: one is too long):
    each string's bytes and length packed into int64 words, then grouped."""
    n = len(arr)
    if not n:
        return [], np.zeros(0, np.int64)
    _, obuf, dbuf = arr.buffers()[:3]
    wide = pa.types.is_large_string(arr.type)
    off: np.ndarray = np.frombuffer(obuf, np.int64 if wide else np.int32)[
        arr.offset:arr.offset + n + 1].astype(np.int64)
    start, lens = off[:-1], np.diff(off)
    null = nulls(arr)
    lens[null] = 0
    width = int(lens.max())
    if width > SHORT_BYTES:
        return None
    data = np.frombuffer(dbuf, np.uint8) if dbuf is not None else np.zeros(1, np.uint8)
    last = max(len(data) - 1, 0)
    words = [np.zeros(n, np.int64) for _ in range(width // 7 + 1)]
    for k in range(width):  # 7 bytes a word: the top byte holds the length
        byte = np.where(lens > k, data[np.minimum(start + k, last)], 0).astype(np.int64)
        words[k // 7] |= byte << (8 * (k % 7))
    words[0] |= np.where(null, -1, lens) << 56
    if len(words) == 1:
        codes, first = _group(words[0])
    else:
        _, inverse = unique_rows(np.column_stack(words))
        codes, first = _group(inverse)
    values: list[str] = []
    for k in first.tolist():
        s, e = int(start[k]), int(start[k] + lens[k])
        values.append("" if null[k] else bytes(data[s:e]).decode("utf-8", "replace"))
    if null.any():
        codes[null] = -1
    return values, codes


def _group(key: np.ndarray, few: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """(code of each element, first element of each code) of an int64 array, codes in order
    of first appearance: by ``few`` comparisons when there are that few distinct values,
    else by one sort."""
    codes = np.full(len(key), -1, np.int64)
    left = np.ones(len(key), bool)
    first: list[int] = []
    while len(first) < few:
        at = int(np.argmax(left))
        if not left[at]:
            return codes, np.array(first, np.int64)
        same = key == key[at]
        codes[same] = len(first)
        left &= ~same
        first.append(at)
    _, firsts, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(firsts, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], firsts[order]


def unique_rows(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, index of each row's distinct row) of an int64 matrix, by one sort.
    Distinct rows come in lexicographic order."""
    if not len(mat):
        return mat, np.zeros(0, np.int64)
    lo = mat.min(axis=0)
    span = (mat.max(axis=0).astype(object) - lo.astype(object) + 1).tolist()
    total = 1
    for s in span:
        total *= s
    if total < 1 << 62:  # the row as one mixed-radix integer: a 1-D sort
        key = np.zeros(len(mat), np.int64)
        for j, s in enumerate(span):
            key *= s
            key += mat[:, j] - lo[j]
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return mat[first], inverse.reshape(-1)
    order = np.lexsort(mat.T[::-1])
    srt = mat[order]
    new = np.ones(len(mat), dtype=bool)
    new[1:] = (srt[1:] != srt[:-1]).any(axis=1)
    group = np.cumsum(new) - 1
    inverse = np.empty(len(mat), np.int64)
    inverse[order] = group
    return srt[new], inverse
