"""The memory families' semantics on a memory's flat array of elements: what a read of a
set of elements gives, what a write stores, what an atomic's read-modify-write returns and
leaves (docs/trace-format.md, "Indexed memory"). Replay's memory executors and Phase 1's
guard evaluator (``record/guards``) both call these, so both compute the same bits.

Elements are named by ``index`` (positions into the flat array, in tile order) and ``sel``
(their tile positions, None: every position of the tile, in order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kernbench.schemas.ops import Op
from kernbench.schemas.storage import BF16, as_dtype, to_f32

#: the operands an atomic's combine takes after the old value, in its order (default
#: ``("value",)``): ``atomic_cas`` compares, then writes (ADR-0610)
OPERANDS: dict[Op, tuple[str, ...]] = {Op.ATOMIC_CAS: ("cmp", "value")}


def gathered(flat: np.ndarray, index: np.ndarray, sel: np.ndarray | None, other: Any,
             shape: tuple[int, ...]) -> np.ndarray:
    """The tile read from ``flat``: masked-off positions take ``other``."""
    if sel is None:
        return flat[index].reshape(shape)
    with np.errstate(all="ignore"):
        out = np.full(shape, other, flat.dtype)
    out.reshape(-1)[sel] = flat[index]
    return out


def written(flat: np.ndarray, index: np.ndarray, sel: np.ndarray | None,
            value: np.ndarray) -> None:
    """Store the masked-in elements of ``value`` (the tile, in the memory's dtype)."""
    v = np.asarray(value).reshape(-1)
    flat[index] = v if sel is None else v[sel]


def combine_of(combine: Callable[..., Any], dtype: np.dtype) -> Callable[..., Any]:
    """An atomic's combine on elements of ``dtype``: bfloat16 computed in float32 and
    rounded back, as ``ml_dtypes`` computes it."""
    return partial_bf16(combine) if dtype == BF16 else combine


def partial_bf16(combine: Callable[..., Any]) -> Callable[..., Any]:
    def bf16_combine(old: np.ndarray, *vs: np.ndarray) -> np.ndarray:
        return as_dtype(np.asarray(combine(to_f32(old), *(to_f32(np.asarray(v, BF16))
                                                          for v in vs))), BF16)
    return bf16_combine


def operand(raw: Any, dtype: np.dtype, shape: tuple[int, ...], sel: np.ndarray | None
            ) -> np.ndarray:
    """One operand of an atomic (value, cmp: a scalar or a tile as read) in the tensor's
    dtype, flat, masked-in positions only."""
    v = np.broadcast_to(as_dtype(np.asarray(raw), BF16) if dtype == BF16 else
                        np.asarray(raw, dtype=dtype), shape).reshape(-1)
    return v if sel is None else v[sel]


def rmw(combine: Callable[..., Any], flat: np.ndarray, index: np.ndarray,
        vs: Sequence[np.ndarray], distinct: bool) -> np.ndarray:
    """Apply an atomic at ``index`` of ``flat`` (``distinct``: no element twice); the old
    values, in ``index`` order. An element repeated in one atomic is applied one after the
    other, in tile order."""
    if distinct:
        old = flat[index]
        flat[index] = np.asarray(combine(old, *vs)).astype(flat.dtype)
        return old
    old = np.empty(len(index), flat.dtype)
    for j, e in enumerate(index.tolist()):
        old[j] = flat[e]
        xs = [v[j:j + 1] for v in vs]
        flat[e] = np.asarray(combine(flat[e:e + 1], *xs)).astype(flat.dtype)[0]
    return old


def returned(old: np.ndarray, shape: tuple[int, ...], sel: np.ndarray | None) -> np.ndarray:
    """An atomic's result tile: the old values at the masked-in positions, 0 elsewhere."""
    res = np.zeros(shape, old.dtype)
    res.reshape(-1)[slice(None) if sel is None else sel] = old
    return res
