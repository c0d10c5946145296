"""``tl.sort`` / ``tl.topk`` along the minor dimension: a bitonic sorting network whose
compare-and-swap steps are ``blocks.select`` / ``where`` / ``blocks.stack2`` (ADR-0560).
Triton's own implementation bitcasts data to integers and xor-sums them (no bitcast of data
in kernbench), so the network is written out here; the values it produces are the same sorted
values. Concrete blocks are sorted by numpy."""

from __future__ import annotations

import numpy as np

from kernbench.errors import ShapeError
from kernbench.record.source import src_here
from kernbench.triton import arith, blocks
from kernbench.triton.core import constexpr_axis, constexpr_int, reshape
from kernbench.triton.value import Concrete, Value, concrete, plain, tensor


def _minor(x: tensor, dim: object, what: str, src: str) -> int:
    nd = len(x.shape)
    if nd == 0:
        raise ShapeError(f"tl.{what} of a scalar", src)
    ax = nd - 1 if plain(dim) is None else constexpr_axis(dim, x.shape, f"{what} dim", src)
    if ax != nd - 1:
        raise ShapeError(f"tl.{what} sorts the minor dimension only, as Triton's (got dim "
                         f"{ax} of a {list(x.shape)} block)", src)
    return ax


def _compare_and_swap(x: Value, j: int, stage: int, m: int, descending: bool,
                      src: str) -> Value:
    """One column of the network: elements 2**j apart, ordered within blocks of 2**stage
    (alternating direction below the last stage)."""
    n, dist = x.shape[-1], 1 << j
    lead = x.shape[:-1]
    y = reshape(x, (*lead, n // (2 * dist), 2, dist))
    ax = len(lead) + 1
    left, right = blocks.select(y, ax, 0, src), blocks.select(y, ax, 1, src)
    q = np.arange(n // (2 * dist)).reshape(-1, 1)
    flip = np.zeros_like(q, dtype=bool) if stage == m else ((q >> (stage - j - 1)) & 1) == 1
    desc = concrete(np.broadcast_to(flip != descending, (n // (2 * dist), dist)).copy())
    swap = arith.binary("ne", arith.binary("gt", left, right), desc)
    lo, hi = arith.where(swap, right, left), arith.where(swap, left, right)
    return reshape(blocks.stack2(lo, hi, ax, src), x.shape)


def _sorted(x: Value, descending: bool, src: str) -> Value:
    n = x.shape[-1]
    if isinstance(x, Concrete):
        v = np.sort(x.value, axis=-1)
        return concrete(np.flip(v, -1) if descending else v, x.dtype)
    m = n.bit_length() - 1
    for stage in range(1, m + 1):
        for j in range(stage - 1, -1, -1):
            x = _compare_and_swap(x, j, stage, m, descending, src)
    return x


def sort(x: object, dim: object = None, descending: object = False) -> Value:
    src = src_here()
    v = arith.value_of(x, src)
    _minor(v, dim, "sort", src)
    return _sorted(v, bool(plain(descending)), src)


def topk(x: object, k: object, dim: object = None, descending: object = True) -> Value:
    """The k largest (smallest) elements of the minor dimension, in sorted order."""
    src = src_here()
    v = arith.value_of(x, src)
    _minor(v, dim, "topk", src)
    kk, n = constexpr_int(k, "topk k", src), v.shape[-1]
    if kk <= 0 or kk & (kk - 1) or kk > n:
        raise ShapeError(f"tl.topk k={kk} must be a power of two <= {n}", src)
    s = _sorted(v, bool(plain(descending)), src)
    if kk == n:
        return s
    lead = v.shape[:-1]
    return blocks.select(reshape(s, (*lead, n // kk, kk)), len(lead), 0, src)


def cat(input: object, other: object, can_reorder: object = False,  # noqa: A002
        dim: object = 0) -> Value:
    """``tl.cat``: ``other`` after ``input`` along ``dim`` (in order, though Triton may
    reorder)."""
    src = src_here()
    a, b = blocks._same(input, other, src, "cat")
    ax = constexpr_int(dim, "cat dim", src) % max(len(a.shape), 1)
    s = blocks.stack2(a, b, ax, src)
    return reshape(s, a.shape[:ax] + (2 * a.shape[ax],) + a.shape[ax + 1:])
