"""Checked offset arithmetic: the one place element offsets, strides and extents are multiplied.

A trace names HBM elements by an address plus element offsets (``base + sum(idx_i * s_i)``
or an int64 array of ``access.parquet``), scaled by the element size. In int64 (numpy,
polars) such products wrap silently: an offset of 2^62 times 4 bytes lands back inside a
tensor. Here every product is computed in Python integers first (exact), or the int64
operands are bounded before numpy multiplies them, and anything outside the format's range
is an ``OffsetError`` (a ``ValueError``) quoting the values. The record side, the validator
and replay all call these (ADR-0535).

The range: byte addresses and sizes stay below ``LIMIT`` = 2^62 (sums of two stay inside
int64), so an element offset relative to an operand's address stays below
``REL_LIMIT = LIMIT // 8`` in magnitude (8 bytes: the largest element).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: byte addresses, sizes and extents are below this (as ``MAX_VALUE`` of the validator)
LIMIT = 1 << 62
#: the largest element size of any trace dtype (bytes)
MAX_ITEMSIZE = 8
#: element offsets relative to an operand's address are below this in magnitude
REL_LIMIT = LIMIT // MAX_ITEMSIZE


class OffsetError(ValueError):
    """An offset, stride or extent outside the format's range (the message quotes it)."""


def _int(value: object, what: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise OffsetError(f"{what} {value!r} is not an integer")
    return int(value)


def product(sizes: Sequence[int], what: str = "shape", limit: int = LIMIT) -> int:
    """``prod(sizes)`` (1 for ``[]``), exact; OffsetError if a size is negative or the
    product reaches ``limit``."""
    n = 1
    for s in sizes:
        s = _int(s, f"{what} size")
        if s < 0:
            raise OffsetError(f"{what} {list(sizes)} has a negative size")
        n *= s
        if n >= limit:
            raise OffsetError(f"{what} {list(sizes)} has {n:,}+ elements, over {limit:,}")
    return n


def span(shape: Sequence[int], strides: Sequence[int], base: int = 0) -> tuple[int, int]:
    """(lowest, highest) of ``base + sum(idx_i * s_i)`` over a non-empty tile, exact;
    OffsetError when either leaves ``(-REL_LIMIT, REL_LIMIT)``: the int64 array of the
    offsets can then be built without wrapping."""
    base = _int(base, "base")
    lo = hi = base
    for n, s in zip(shape, strides, strict=True):
        s = _int(s, "stride")
        if abs(s) >= REL_LIMIT:
            raise OffsetError(f"stride {s} is out of range (|stride| < 2^59)")
        reach = s * (int(n) - 1) if n > 0 else 0
        lo, hi = lo + min(reach, 0), hi + max(reach, 0)
    check_rel(lo, hi)
    return lo, hi


def check_rel(lo: int, hi: int) -> None:
    """OffsetError unless the relative element offsets ``lo..hi`` lie in
    ``(-REL_LIMIT, REL_LIMIT)``."""
    for v in (int(lo), int(hi)):
        if not -REL_LIMIT < v < REL_LIMIT:
            raise OffsetError(f"element offset {v} is out of range (|offset| < 2^59)")


def check_array(rel: np.ndarray) -> tuple[int, int]:
    """(min, max) of an int64 offset array (``(0, -1)`` when empty), both checked by
    ``check_rel`` before anything multiplies them."""
    if not rel.size:
        return 0, -1
    lo, hi = int(rel.min()), int(rel.max())
    check_rel(lo, hi)
    return lo, hi


def byte_range(addr: int, lo: int, hi: int, itemsize: int) -> tuple[int, int]:
    """``[addr + lo * itemsize, addr + (hi + 1) * itemsize)``, exact, the bytes elements
    ``lo..hi`` of an operand at ``addr`` cover; OffsetError outside ``[0, LIMIT)``."""
    first = int(addr) + int(lo) * int(itemsize)
    last = int(addr) + (int(hi) + 1) * int(itemsize)
    if not 0 <= first <= last <= LIMIT:
        raise OffsetError(f"elements {lo}..{hi} of {itemsize} bytes at address {addr} cover "
                          f"bytes [{first}, {last}), outside [0, 2^62)")
    return first, last


def addresses(addr: int, rel: np.ndarray, itemsize: int) -> np.ndarray:
    """``addr + rel * itemsize`` as int64, the range checked first (``byte_range``)."""
    lo, hi = check_array(rel)
    if rel.size:
        byte_range(addr, lo, hi, itemsize)
    return int(addr) + rel.astype(np.int64, copy=False) * int(itemsize)


def aligned(addr: int, itemsize: int) -> bool:
    """Whether ``addr`` is a whole number of ``itemsize`` elements."""
    return itemsize > 0 and int(addr) % int(itemsize) == 0
