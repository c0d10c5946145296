"""Moving elements between blocks: ``tl.join`` / ``tl.split`` / ``tl.interleave`` /
``tl.flip``, and ``select`` (one index of an axis), the primitive ``tl.reduce`` /
``tl.associative_scan`` and the batched ``tl.dot`` are built from.

The op table has no slice op, so a block is cut with ops it has (ADR-0560): index ``k`` of an
axis is ``max(where(axis_index == k, x, lowest), axis)`` — exact for every dtype (``lowest``
is -inf, the integer minimum or False; ``max(v, lowest) == v`` bit for bit, -0.0 and NaN
included) — and two blocks are joined by one ``where`` of a constant one-hot mask over their
broadcast. Concrete values (index arithmetic) and pointer offsets move by numpy, recording
nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernbench.errors import KernelError, ShapeError
from kernbench.record.lowering import semantics as sem
from kernbench.record.source import src_here
from kernbench.triton import arith, data
from kernbench.triton import dtypes as d
from kernbench.triton.core import broadcast, broadcast_to, constexpr_axis, constexpr_int, reshape
from kernbench.triton.value import Concrete, Pointer, Symbolic, Value, concrete, plain, pointer


def lowest(t: d.dtype) -> float | int | bool:
    """The identity of ``max`` in ``t``: -inf, the integer minimum, False."""
    if t.is_floating():
        return float("-inf")
    return False if t.is_bool() else int(np.iinfo(t.np).min)


def _numpy(x: Value, fn: Callable[[np.ndarray], np.ndarray]) -> Concrete | Pointer | None:
    """``fn`` applied to concrete values or concrete pointer offsets; None for data."""
    if isinstance(x, Concrete):
        return concrete(fn(x.value), x.dtype)
    if isinstance(x, Pointer):
        if isinstance(x.offsets, np.ndarray):
            return pointer(x.base, fn(x.offsets), x.dtype.element_ty)
        raise KernelError("moving elements of a pointer block with offsets from loaded data "
                          "is not supported by kernbench", src_here())
    return None


def select(x: Value, axis: int, k: int, src: str) -> Value:
    """``x`` at index ``k`` of ``axis`` (the axis removed)."""
    got = _numpy(x, lambda v: np.take(v, k, axis))
    if got is not None or not isinstance(x, Symbolic):
        assert got is not None, "_numpy moves every value but data"
        return got
    n = x.shape[axis]
    onehot = (np.arange(n) == k).reshape([n if i == axis else 1 for i in range(len(x.shape))])
    picked = data.where(concrete(onehot), x, lowest(x.dtype), x.dtype, src)
    return data.symbolic(sem.reduce(data.table_op("max", src), picked.handle, axis, False),
                         x.dtype)


def pairs(x: Value, axis: int, src: str) -> tuple[Value, Value]:
    """(x[..., 0::2, ...], x[..., 1::2, ...]) along ``axis`` (of even length)."""
    shape = x.shape[:axis] + (x.shape[axis] // 2, 2) + x.shape[axis + 1:]
    y = reshape(x, shape)
    return select(y, axis + 1, 0, src), select(y, axis + 1, 1, src)


def stack2(a: Value, b: Value, axis: int, src: str) -> Value:
    """``a`` and ``b`` (one shape, one dtype) stacked on a new axis of size 2 at ``axis``."""
    unit = a.shape[:axis] + (1,) + a.shape[axis:]
    if not isinstance(a, Symbolic) and not isinstance(b, Symbolic):
        other = b.value if isinstance(b, Concrete) else b.offsets
        got = _numpy(a, lambda v: np.stack([v, np.asarray(other)], axis))
        if got is not None:
            return got
    onehot = np.arange(2).reshape([2 if i == axis else 1 for i in range(len(unit))]) == 0
    x, y = reshape(a, unit), reshape(b, unit)
    if isinstance(x, Pointer) or isinstance(y, Pointer):
        raise KernelError("moving elements of a pointer block with offsets from loaded data "
                          "is not supported by kernbench", src)
    return data.where(concrete(onehot), x, y, x.dtype, src)


def interleave_axis(a: Value, b: Value, axis: int, src: str) -> Value:
    """out[..., 2i, ...] = a[..., i, ...], out[..., 2i + 1, ...] = b[..., i, ...]."""
    s = stack2(a, b, axis + 1, src)
    return reshape(s, a.shape[:axis] + (2 * a.shape[axis],) + a.shape[axis + 1:])


def _same(a: object, b: object, src: str, what: str) -> tuple[Value, Value]:
    x, y = (arith.numeric(arith.value_of(v, src), f"tl.{what}", src) for v in (a, b))
    t, _ = arith.types("add", x, y, src)
    return broadcast(arith.cast(x, t), arith.cast(y, t))


def join(a: object, b: object) -> Value:
    """``tl.join``: a new minor axis of size 2 (a first)."""
    src = src_here()
    a, b = _same(a, b, src, "join")
    return stack2(a, b, len(a.shape), src)


def split(a: object) -> tuple[Value, Value]:
    """``tl.split``: the two halves of a minor axis of size 2."""
    src = src_here()
    x = arith.value_of(a, src)
    if not x.shape or x.shape[-1] != 2:
        raise ShapeError(f"tl.split needs a last dimension of size 2, got {list(x.shape)}", src)
    ax = len(x.shape) - 1
    return select(x, ax, 0, src), select(x, ax, 1, src)


def interleave(a: object, b: object) -> Value:
    """``tl.interleave``: the minor axes of a and b alternated."""
    src = src_here()
    a, b = _same(a, b, src, "interleave")
    if not a.shape:
        raise ShapeError("tl.interleave of scalars", src)
    return interleave_axis(a, b, len(a.shape) - 1, src)


def flip_axis(x: Value, axis: int, src: str) -> Value:
    """``x`` reversed along ``axis`` (a power of two): flip(x) = interleave(flip(odd),
    flip(even))."""
    got = _numpy(x, lambda v: np.flip(v, axis))
    if got is not None or x.shape[axis] == 1:
        return got if got is not None else x
    ev, od = pairs(x, axis, src)
    return interleave_axis(flip_axis(od, axis, src), flip_axis(ev, axis, src), axis, src)


def flip(x: object, dim: object = None) -> Value:
    """``tl.flip``: reversed along ``dim`` (default: the last)."""
    src = src_here()
    v = arith.value_of(x, src)
    nd = len(v.shape)
    if nd == 0:
        raise ShapeError("tl.flip of a scalar", src)
    ax = (nd - 1) if plain(dim) is None else constexpr_axis(dim, v.shape, "flip dim", src)
    return flip_axis(v, ax, src)


def histogram(input: object, num_bins: object, mask: object = None  # noqa: A002
              ) -> Concrete | Symbolic:
    """``tl.histogram``: int32 counts of the values 0 .. num_bins - 1 of a 1-D block (values
    outside are not counted): one comparison against the bins, a sum over the input."""
    src = src_here()
    x = arith.value_of(input, src)
    bins = constexpr_int(num_bins, "histogram num_bins", src)
    if len(x.shape) != 1 or isinstance(x, Pointer) or not x.dtype.is_int():
        raise ShapeError(f"tl.histogram takes a 1-D integer block, got {list(x.shape)} "
                         f"{x.dtype!r}", src)
    hit = arith.binary("eq", reshape(x, (x.shape[0], 1)),
                       concrete(np.arange(bins, dtype=np.int32).reshape(1, bins)))
    m = plain(mask)
    if m is not None:
        mask_col = reshape(arith.value_of(m, src), (x.shape[0], 1))
        hit = arith.binary("and_", hit, broadcast_to(mask_col, hit.shape))
    counts = arith.cast(hit, d.int32)
    if isinstance(counts, Concrete):
        return concrete(counts.value.sum(axis=0, dtype=np.int32), d.int32)
    return data.symbolic(sem.reduce(data.table_op("sum", src), counts.handle, 0, False), d.int32)


def stack(xs: list[Symbolic], src: str) -> Value:
    """Blocks of one shape stacked on a new leading axis: a chain of ``where``s."""
    out = reshape(xs[0], (1, *xs[0].shape))
    n = len(xs)
    for i, x in enumerate(xs[1:], start=1):
        onehot = (np.arange(n) == i).reshape((n,) + (1,) * len(x.shape))
        out = arith.where(concrete(onehot), reshape(x, (1, *x.shape)), out)
    return out


def dot(input: object, other: object, acc: object = None,  # noqa: A002
        input_precision: object = None, allow_tf32: object = None,
        max_num_imprecise_acc: object = None, out_dtype: object = None) -> Value:
    """``tl.dot``; a 3-D (batched) dot is one 2-D dot per batch on the GEMM engine, the
    batch's operands selected and the products stacked as ``select`` / ``stack`` do."""
    from kernbench.triton import mathops

    a, b = arith.value_of(input), arith.value_of(other)
    opts = {"input_precision": input_precision, "allow_tf32": allow_tf32,
            "max_num_imprecise_acc": max_num_imprecise_acc, "out_dtype": out_dtype}
    if len(a.shape) != 3 and len(b.shape) != 3:
        return mathops.dot(a, b, acc, **opts)
    src = src_here()
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[0] != b.shape[0]:
        raise ShapeError(f"a batched tl.dot needs two 3-D blocks of one batch size, got "
                         f"{list(a.shape)} @ {list(b.shape)}", src)
    acc = plain(acc)
    c = None if acc is None else arith.value_of(acc, src)
    outs = [mathops.dot(select(a, 0, i, src), select(b, 0, i, src),
                        None if c is None else select(c, 0, i, src), **opts)
            for i in range(a.shape[0])]
    return stack(outs, src)
