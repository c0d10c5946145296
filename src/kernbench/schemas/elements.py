"""Indexed memory in the trace format (version 2): which HBM elements an indexed row moves.

An indexed ``dma_read``/``dma_write``/atomic row names its HBM operand as
``(hbm, pe, A, tile shape, tensor dtype)`` where ``A`` is the address of the lowest
masked-in element, and says in ``attrs`` where each tile element lives, in elements
relative to ``A``:

* ``{"strides": [s0, s1, ...], "base": b}``: element ``idx`` at ``b + sum(idx_i * s_i)``
  (affine tiles: row-major, column, ``make_block_ptr``); ``base`` is omitted when 0;
* ``{"access": N}``: the int64 array ``N`` of ``access.parquet`` (tile shape) holds them.

``{"mask": N}`` (a bool array of ``access.parquet``) selects the elements that move; the
others move nothing, read as ``other`` (``{"other": v}``, default 0) and are never checked.
Gather/scatter/atomic rows whose offsets or mask come from TCM say ``"offsets": "input"``
/ ``"mask": "input"`` and take them as input operands instead. ``nbytes`` and
``num_elements`` count the masked-in elements. Nothing here executes trace content: arrays
are decoded with ``np.frombuffer`` from declared dtypes and shapes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kernbench.schemas import offsets as off
from kernbench.schemas.dtypes import DTYPES

KINDS = ("offsets", "mask", "values")
#: attrs keys that make a dma row indexed
INDEXED_KEYS = ("strides", "access")
INPUT = "input"


def is_indexed(attrs: Mapping[str, Any]) -> bool:
    return "strides" in attrs or "access" in attrs


# -- access.parquet arrays ------------------------------------------------------------------
def encode(kind: str, arr: np.ndarray) -> tuple[str, tuple[int, ...], bytes]:
    """(dtype name, shape, little-endian bytes) of an access array; masks are bit-packed."""
    shape = tuple(int(s) for s in arr.shape)
    if kind == "mask":
        return "bool", shape, np.packbits(np.asarray(arr, np.bool_).reshape(-1),
                                          bitorder="little").tobytes()
    if kind == "offsets":
        return "int64", shape, np.ascontiguousarray(arr, "<i8").tobytes()
    a = np.ascontiguousarray(arr)
    name = next((n for n, d in DTYPES.items() if d.np == a.dtype), None)
    if name is None:
        raise ValueError(f"const values of numpy dtype {a.dtype} have no trace dtype")
    return name, shape, a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def decode(kind: str, dtype: str, shape: Sequence[int], data: Any) -> np.ndarray:
    """The array of one access.parquet row; ValueError when its bytes do not fit."""
    if kind not in KINDS:
        raise ValueError(f"access kind {kind!r} is not one of {KINDS}")
    shape = tuple(int(s) for s in shape)
    n = off.product(shape, "access shape")
    if kind == "mask":
        if dtype != "bool" or len(data) != (n + 7) // 8:
            raise ValueError(f"mask {dtype} {list(shape)} has {len(data)} bytes, expected "
                             f"{(n + 7) // 8} bytes of bool bits")
        bits = np.unpackbits(np.frombuffer(data, np.uint8), count=n, bitorder="little")
        return bits.astype(np.bool_).reshape(shape)
    if kind == "offsets" and dtype != "int64":
        raise ValueError(f"offsets must be int64, not {dtype!r}")
    if dtype not in DTYPES and dtype != "int64":
        raise ValueError(f"access dtype {dtype!r} is unknown")
    npd = np.dtype("<i8") if dtype == "int64" else DTYPES[dtype].np.newbyteorder("<")
    if len(data) != n * npd.itemsize:
        raise ValueError(f"{kind} {dtype} {list(shape)} has {len(data)} bytes, expected "
                         f"{n * npd.itemsize}")
    return np.frombuffer(data, npd).astype(npd.newbyteorder("="), copy=False).reshape(shape)


#: decoded access arrays kept for reuse, in bytes (beyond it they are decoded per use)
CACHE_BYTES = 64 << 20


class AccessTable:
    """The rows of ``access.parquet`` by id (a mapping to ``(kind, dtype, shape, bytes)``,
    kept as given), decoded on first use; up to ``CACHE_BYTES`` of decoded arrays are
    cached."""

    def __init__(self, rows: Mapping[int, tuple[str, str, tuple[int, ...], Any]]) -> None:
        self.rows = rows
        self._arrays: dict[int, np.ndarray] = {}
        self._cached = 0

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, ref: Any, kind: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """Array ``ref`` of ``kind`` (and ``shape``); ValueError naming what is wrong."""
        if not isinstance(ref, int) or isinstance(ref, bool) or ref not in self.rows:
            raise ValueError(f"access id {ref!r} is not in access.parquet "
                             f"({len(self.rows)} rows)")
        k, dtype, shp, data = self.rows[ref]
        if k != kind:
            raise ValueError(f"access id {ref} is a {k!r} array, expected {kind!r}")
        arr = self._arrays.get(ref)
        if arr is None:
            arr = decode(k, dtype, shp, data)
            arr.flags.writeable = False
            if self._cached + arr.nbytes <= CACHE_BYTES:
                self._arrays[ref] = arr
                self._cached += arr.nbytes
        if shape is not None and arr.shape != tuple(shape):
            raise ValueError(f"access id {ref} ({kind}) has shape {list(arr.shape)}, the "
                             f"operand {list(shape)}")
        return arr


EMPTY = AccessTable({})


# -- the elements of an indexed row ----------------------------------------------------------
def affine(offsets: np.ndarray) -> tuple[int, list[int]] | None:
    """``(o0, strides)`` when ``offsets[idx] == o0 + sum(idx_i * s_i)`` (strides 0 on axes of
    size 1), else None."""
    if offsets.size == 0:
        return None
    o0 = int(offsets.reshape(-1)[0])
    strides, want = [], np.full((1,) * offsets.ndim, o0, np.int64)
    for ax, n in enumerate(offsets.shape):
        s = 0
        if n > 1:
            idx = [0] * offsets.ndim
            idx[ax] = 1
            s = int(offsets[tuple(idx)]) - o0
        strides.append(s)
        shape = [1] * offsets.ndim
        shape[ax] = n
        want = want + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return (o0, strides) if np.array_equal(want, offsets) else None


def strided(shape: tuple[int, ...], strides: Sequence[int], base: int = 0) -> np.ndarray:
    """``base + sum(idx_i * s_i)`` over the tile, int64 and read-only; OffsetError (before
    any array is built) when an offset would leave the format's range
    (``schemas.offsets.span``). A trace's loads repeat a few tile geometries thousands of
    times (one per program and step), so small tiles are built once per geometry."""
    key = (tuple(shape), tuple(strides), base)
    hit = _STRIDED.get(key)
    if hit is not None:
        return hit
    out = _strided(*key)
    if out.size <= _MEMO_ELEMENTS:
        if len(_STRIDED) >= _MEMO_TILES:
            _STRIDED.clear()
        _STRIDED[key] = out
    return out


#: at most this many small tiles (of at most this many elements: 32 KiB of offsets) are kept
_MEMO_TILES, _MEMO_ELEMENTS = 256, 4096
_STRIDED: dict[tuple[tuple[int, ...], tuple[int, ...], int], np.ndarray] = {}


def _strided(shape: tuple[int, ...], strides: Sequence[int], base: int) -> np.ndarray:
    if all(n > 0 for n in shape):
        off.span(shape, strides, base)
    out = np.full((1,) * len(shape), int(base), np.int64)
    for ax, (n, s) in enumerate(zip(shape, strides, strict=True)):
        dims = [1] * len(shape)
        dims[ax] = n
        out = out + (np.arange(n, dtype=np.int64) * int(s)).reshape(dims)
    return np.broadcast_to(out, shape)


#: a strided tile's (strides, base, lowest, highest relative offset)
Geometry = tuple[tuple[int, ...], int, int, int]


def geometry(attrs: Mapping[str, Any], shape: tuple[int, ...]) -> Geometry | None:
    """``(strides, base, lowest, highest)`` of a strided tile: the lowest and highest offset
    relative to the operand address over every element, masked-off ones included (a
    superset of the moved elements), exact; None for an ``access`` row or an empty tile.
    Memoised per geometry; for attrs ``elements`` accepted."""
    if "strides" not in attrs or not all(n > 0 for n in shape):
        return None
    base = attrs.get("base", 0)  # both checked by ``elements`` (``strides_of``)
    key = (tuple(shape), tuple(attrs["strides"]), base)
    hit = _GEOMETRY.get(key)
    if hit is None:
        if len(_GEOMETRY) >= _MEMO_TILES:
            _GEOMETRY.clear()
        hit = _GEOMETRY[key] = (key[1], base, *off.span(shape, key[1], base))
    return hit


_GEOMETRY: dict[tuple[tuple[int, ...], tuple[int, ...], int], Geometry] = {}


def strides_of(attrs: Mapping[str, Any], shape: tuple[int, ...]) -> tuple[list[int], int]:
    """(strides, base) of a strided row; ValueError when they do not fit the tile."""
    strides = attrs["strides"]
    if (not isinstance(strides, list) or len(strides) != len(shape)
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in strides)):
        raise ValueError(f"strides {strides!r} do not fit the tile {list(shape)}")
    base = attrs.get("base", 0)
    if not isinstance(base, int) or isinstance(base, bool):
        raise ValueError(f"base {base!r} is not an integer")
    return strides, base


def elements(attrs: Mapping[str, Any], shape: tuple[int, ...], table: AccessTable = EMPTY
             ) -> tuple[np.ndarray, np.ndarray | None]:
    """(offsets relative to the operand address, mask or None) of an indexed row, in tile
    shape; ValueError when the attrs do not describe the tile."""
    if "strides" in attrs:
        rel = strided(shape, *strides_of(attrs, shape))
    elif "access" in attrs:
        rel = table.get(attrs["access"], "offsets", shape)
    else:
        raise ValueError("an indexed row needs 'strides' or 'access' in its attrs")
    mask = mask_of(attrs, shape, table)
    if "access" in attrs:  # the moved offsets of a stored array, bounded before any product
        off.check_array(moved(rel, mask))
    return rel, mask


def mask_of(attrs: Mapping[str, Any], shape: tuple[int, ...], table: AccessTable = EMPTY
            ) -> np.ndarray | None:
    ref = attrs.get("mask")
    return None if ref is None or ref == INPUT else table.get(ref, "mask", shape)


def moved(rel: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """The relative offsets of the masked-in elements, flat, in tile order."""
    flat = rel.reshape(-1)
    return flat if mask is None else flat[mask.reshape(-1)]


def runs(elements_: np.ndarray) -> np.ndarray:
    """Lengths (in elements) of the maximal runs of consecutive addresses among the distinct
    element offsets, in address order."""
    if not len(elements_):
        return np.zeros(0, np.int64)
    step = np.diff(elements_)
    if not bool((step > 0).all()):  # tile order is usually address order already
        step = np.diff(np.unique(elements_))
    cut = np.flatnonzero(step != 1) + 1
    return np.diff(np.concatenate(([0], cut, [len(step) + 1]))).astype(np.int64)


def dma_work(elements_: np.ndarray, itemsize: int, burst: int) -> tuple[int, ...]:
    """The DMA cost model's ``work`` of a transfer moving these elements: ``(bytes,)`` for a
    single run (priced as a contiguous transfer), else ``(bytes, burst bytes, runs)``."""
    lengths = runs(elements_)
    if len(lengths) <= 1:
        return (int(lengths.sum()) * itemsize,)
    bursts = -(-(lengths * itemsize) // burst)
    return (int(lengths.sum()) * itemsize, int(bursts.sum()) * burst, len(lengths))
