"""``tl`` ids, creation, layout and loops: concrete where Triton knows the values at compile
or launch time (``program_id``, ``arange``, ``zeros``...), views of data otherwise."""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from kernbench.errors import KernelError, ShapeError
from kernbench.record.lowering import bounds
from kernbench.record.lowering import semantics as sem
from kernbench.record.machine.context import current
from kernbench.record.source import src_here
from kernbench.schemas.policy import axis_of
from kernbench.triton import arith, binding, data
from kernbench.triton import dtypes as d
from kernbench.triton.value import (
    Concrete,
    Pointer,
    Symbolic,
    Value,
    at,
    concrete,
    int_value,
    plain,
    pointer,
    tensor,
)

MAX_NUMEL = 1 << 20  # Triton's TRITON_MAX_TENSOR_NUMEL
_T = TypeVar("_T")


@dataclass(frozen=True)
class LaunchOptions:
    """The launch options a kernel body reads: ``num_stages``, the depth ``tl.range`` and
    ``tl.static_range`` pipeline their loads (None: the launch gave none)."""

    num_stages: int | None = None


DEFAULT_OPTIONS = LaunchOptions()
_OPTIONS: ContextVar[LaunchOptions] = ContextVar("kernbench.triton.launch_options",
                                                 default=DEFAULT_OPTIONS)


def launch_options() -> LaunchOptions:
    """The options of the launch whose program runs now (the defaults outside one)."""
    return _OPTIONS.get()


@contextmanager
def launched_with(options: LaunchOptions) -> Iterator[LaunchOptions]:
    """``options`` for the kernel body run inside the block (the launch adapter, once per
    program); the previous options are back after it, however the body ends."""
    token = _OPTIONS.set(options)
    try:
        yield options
    finally:
        _OPTIONS.reset(token)


def constexpr_int(x: object, what: str, src: str | None = None) -> int:
    """A compile-time integer (a constexpr or a literal), or Triton's refusal."""
    if type(x) is int:
        return x
    x = plain(x)
    if isinstance(x, bool) or not isinstance(x, int | np.integer):
        raise KernelError(f"{what} must be a tl.constexpr integer, got {x!r}", at(src))
    return int(x)


def constexpr_axis(axis: object, shape: tuple[int, ...], what: str, src: str,
                   of: str | None = None) -> int:
    """A compile-time axis of a block of ``shape`` (``of``: how a message names it),
    normalised into ``[0, ndim)`` by the one rule every phase uses
    (``schemas.policy.axis_of``); out of range is Triton's refusal, never wrapped."""
    ax = constexpr_int(axis, what, src)
    try:
        return axis_of(shape, ax)
    except ValueError:
        n = len(shape)
        raise ShapeError(f"{what}: axis {ax} out of range for {of or f'a {list(shape)} block'}"
                         f" (Triton accepts {-n} <= axis < {n})", src) from None


def block_shape(shape: object, what: str, src: str) -> tuple[int, ...]:
    """A block shape: constexpr ints, each a power of two, at most 2**20 elements."""
    dims = plain(shape)
    if isinstance(dims, int | np.integer | tensor):
        dims = (dims,)
    out = tuple(constexpr_int(s, f"{what} dimension", src) for s in dims)
    for s in out:
        if s <= 0 or s & (s - 1):
            raise ShapeError(f"{what} {list(out)}: dimension {s} is not a power of two "
                             "(Triton requires power-of-two block shapes)", src)
    if int(np.prod(out, dtype=np.int64)) > MAX_NUMEL:
        raise ShapeError(f"{what} {list(out)} exceeds Triton's {MAX_NUMEL} elements", src)
    return out


# -- ids -----------------------------------------------------------------------------------
def _grid_axis(axis: object, what: str) -> int:
    ax = constexpr_int(axis, f"{what} axis")
    if ax not in (0, 1, 2):
        raise KernelError(f"{what} axis must be 0, 1 or 2, got {ax}", src_here())
    return ax


def program_id(axis: object) -> tensor:
    ax, pids = _grid_axis(axis, "program_id"), current().pids
    return concrete(np.int32(pids[ax] if ax < len(pids) else 0), d.int32)


def num_programs(axis: object) -> tensor:
    ax, grid = _grid_axis(axis, "num_programs"), current().grid
    return concrete(np.int32(grid[ax] if ax < len(grid) else 1), d.int32)


# -- creation ------------------------------------------------------------------------------
def arange(start: object, end: object) -> tensor:
    lo, hi = constexpr_int(start, "arange start"), constexpr_int(end, "arange end")
    if hi <= lo:
        raise ShapeError(f"arange({lo}, {hi}): end must be greater than start", src_here())
    n = hi - lo
    if n & (n - 1):
        raise ShapeError(f"arange({lo}, {hi}) has length {n}, not a power of two (Triton "
                         "requires a power-of-two range)", src_here())
    if lo < -2**31 or hi > 2**31:
        raise ShapeError(f"arange({lo}, {hi}) does not fit int32", src_here())
    if not arith.MEMO or n > arith.MEMO_ELEMENTS:
        return concrete(np.arange(lo, hi, dtype=np.int32), d.int32)
    got = arith.memo().get(("arange", lo, hi))  # every program makes the same ranges
    if got is None:
        v = np.arange(lo, hi, dtype=np.int32)
        v.flags.writeable = False
        got = (v, arith.array_key(d.int32, v))
        arith.memo().keep(("arange", lo, hi), got, 2 * v.nbytes, arith.MEMO_LIMIT,
                          arith.MEMO_BYTES)
    return Concrete(d.int32, *got)


def full(shape: object, value: object, dtype: object) -> tensor:
    src = src_here()
    shp = block_shape(shape, "full shape", src)
    t = d.by_name(plain(dtype))
    value = arith.operand(value, src, "full value")
    if isinstance(value, Symbolic | Pointer):
        return broadcast_to(arith.cast(value, t), shp)
    return concrete(np.full(shp, arith.values(value, t)), t)


def zeros(shape: object, dtype: object) -> tensor:
    return full(shape, 0, dtype)


def zeros_like(x: tensor) -> tensor:
    return full(x.shape, 0, x.dtype)


def full_like(x: tensor, value: object, dtype: object = None) -> tensor:
    return full(x.shape, value, dtype or x.dtype)


# -- layout ----------------------------------------------------------------------------------
def _view(x: tensor, shape: tuple[int, ...],
          concrete_fn: Callable[[np.ndarray], np.ndarray]) -> Value:
    """``x`` seen with another shape; concrete values and pointer offsets move by numpy."""
    if isinstance(x, Concrete):
        return concrete(concrete_fn(x.value), x.dtype)
    if isinstance(x, Pointer):
        if isinstance(x.offsets, np.ndarray):
            return pointer(x.base, concrete_fn(x.offsets), x.dtype.element_ty)
        return pointer(x.base, sem.reshape(data.row_major(x.offsets), shape), x.dtype.element_ty)
    assert isinstance(x, Symbolic), "every value is concrete, a pointer or symbolic"
    return data.symbolic(sem.reshape(data.row_major(x.handle), shape), x.dtype)


def index(x: tensor, key: object) -> Value:
    """``x[:, None]``, ``x[None, :]``: new unit axes; only ``None`` and ``:`` are allowed."""
    key = key if isinstance(key, tuple) else (key,)
    shape, axis = [], 0
    for k in key:
        if k is None:
            shape.append(1)
        elif isinstance(k, slice) and k == slice(None):
            if axis >= len(x.shape):
                raise ShapeError(f"too many indices for a {list(x.shape)} block", src_here())
            shape.append(x.shape[axis])
            axis += 1
        else:
            raise KernelError(f"indexing a block with {k!r} is rejected by Triton too (only "
                              "None and ':' as in x[:, None])", src_here())
    shape += list(x.shape[axis:])
    shp = tuple(shape)
    if type(x) is Concrete:  # the same values in C order: the memo key keeps its bytes
        mk = x.memo_key
        return Concrete(x.dtype, x.value[key], None if mk is None else (mk[0], shp, mk[2], mk[3]))
    return _view(x, shp, lambda v: v[key])


def reshape(x: tensor, *shape: object, can_reorder: bool = False) -> Value:
    src = src_here()
    if len(shape) == 1 and isinstance(plain(shape[0]), tuple | list):
        shape = tuple(plain(shape[0]))
    shp = tuple(constexpr_int(s, "reshape dimension", src) for s in shape)
    if int(np.prod(shp, dtype=np.int64)) != x.numel:
        raise ShapeError(f"reshape of {list(x.shape)} to {list(shp)} changes the number of "
                         "elements", src)
    return _view(x, shp, lambda v: v.reshape(shp))


view = reshape


def ravel(x: tensor, can_reorder: bool = False) -> Value:
    """``tl.ravel``: the block as one row-major dimension."""
    return reshape(x, (x.numel,))


def expand_dims(x: tensor, axis: object) -> Value:
    src = src_here()
    axes = plain(axis)
    axes = [axes] if isinstance(axes, int | np.integer) else list(axes)
    out = (1,) * (len(x.shape) + len(axes))  # the result's rank: its axes count from there
    axes = sorted(constexpr_axis(a, out, "expand_dims axis", src, f"a {len(out)}-d result")
                  for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, tuple(shape))


def trans(x: tensor, *dims: object) -> Value:
    if len(dims) == 1 and isinstance(plain(dims[0]), tuple | list):
        dims = tuple(plain(dims[0]))
    order = tuple(constexpr_int(a, "trans dim") for a in dims) or tuple(
        builtins.range(len(x.shape) - 1, -1, -1))  # ``range`` here is tl.range
    if isinstance(x, Concrete) or (isinstance(x, Pointer) and type(x.offsets) is np.ndarray):
        return _view(x, tuple(x.shape[i] for i in order), lambda v: np.transpose(v, order))
    if len(x.shape) != 2 or order != (1, 0):
        raise KernelError(f"trans of loaded data supports 2-D blocks only, got "
                          f"{list(x.shape)} with order {list(order)}", src_here())
    if isinstance(x, Pointer):
        raise KernelError("trans of a pointer block with data-dependent offsets", src_here())
    assert isinstance(x, Symbolic), "every value is concrete, a pointer or symbolic"
    return data.symbolic(sem.trans(x.handle), x.dtype)


permute = trans


def broadcast_to(x: object, *shape: object) -> Value:
    src = src_here()
    if len(shape) == 1 and isinstance(plain(shape[0]), tuple | list):
        shape = tuple(plain(shape[0]))
    shp = tuple(constexpr_int(s, "broadcast_to dimension", src) for s in shape)
    x = arith.value_of(x, src)
    if x.shape == shp:
        return x
    try:
        np.broadcast_shapes(x.shape, shp)
    except ValueError:
        raise ShapeError(f"cannot broadcast {list(x.shape)} to {list(shp)}", src) from None
    if isinstance(x, Concrete) or isinstance(x, Pointer) and type(x.offsets) is np.ndarray:
        return _view(x, shp, lambda v: np.array(np.broadcast_to(v, shp)))
    if isinstance(x, Symbolic):
        return data.broadcast(x, shp)
    assert isinstance(x, Pointer) and not isinstance(x.offsets, np.ndarray)
    return pointer(x.base, sem.broadcast(x.offsets, shp), x.dtype.element_ty)


def broadcast(a: object, b: object) -> tuple[Value, Value]:
    shp = np.broadcast_shapes(getattr(a, "shape", ()), getattr(b, "shape", ()))
    return broadcast_to(a, shp), broadcast_to(b, shp)


# -- loops and compile-time checks -------------------------------------------------------
def _pipelined(it: builtins.range, num_stages: int | None, src: str) -> Iterator[int]:
    bounded = bounds.loop(it, src)  # a loop nest beyond KERNBENCH_MAX_OPS is refused here
    try:
        from kernbench.record.machine.pipeline import pipelined
    except ImportError:  # no load pipelining (record/machine/pipeline.py): loads issue at use
        return bounded
    return pipelined(bounded, num_stages, src=src)


def _bounds(args: tuple[object, ...], src: str) -> builtins.range:
    return builtins.range(*(int_value(a, "loop bound", src) for a in args))


class range:  # noqa: N801 - Triton's spelling: ``tl.range(start, end, step, num_stages=)``
    """A loop whose variable is an int32 scalar; its loads pipeline ``num_stages`` deep."""

    def __init__(self, arg1: object, arg2: object = None, step: object = None,
                 num_stages: object = None, loop_unroll_factor: object = None,
                 **_hints: object) -> None:
        self.src = src_here()
        args = tuple(a for a in (arg1, arg2, step) if a is not None)
        self.it = _bounds(args, self.src)
        ns = plain(num_stages)
        self.num_stages: int | None = launch_options().num_stages if ns is None else int(ns)

    def __iter__(self) -> Iterator[tensor]:
        for i in _pipelined(self.it, self.num_stages, self.src):
            yield concrete(np.int32(i), d.int32)


class static_range:  # noqa: N801 - Triton's spelling; the loop variable is a constexpr
    def __init__(self, arg1: object, arg2: object = None, step: object = None) -> None:
        self.src = src_here()
        args = tuple(a for a in (arg1, arg2, step) if a is not None)
        self.it = builtins.range(*(constexpr_int(a, "static_range bound", self.src)
                                   for a in args))

    def __iter__(self) -> Iterator[int]:
        return iter(_pipelined(self.it, launch_options().num_stages, self.src))


def builtin_range(*args: object) -> Iterator[int] | range:
    """Python's ``range`` inside a kernel: Triton compiles it as ``tl.range``; over plain
    ints (all constexpr) it stays a Python range of ints."""
    if all(isinstance(plain(a), int) for a in args):
        return _pipelined(builtins.range(*(plain(a) for a in args)),
                          launch_options().num_stages, src_here())
    return range(*args)


def cdiv(x: object, div: object) -> int | tensor:
    a, b = plain(x), plain(div)
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (a + (b - 1)) // b


def static_assert(cond: object, msg: object = "") -> None:
    src = src_here()
    c = plain(cond)
    if isinstance(c, Symbolic | Pointer):
        raise KernelError("tl.static_assert on loaded data", src)
    if not bool(c):
        raise KernelError(f"static_assert failed: {plain(msg)}", src)


def debug_barrier() -> None:
    """A no-op: a program's ops are already ordered."""


def multiple_of(x: _T, values: object) -> _T:
    """Compiler hints (alignment, contiguity) do not change values."""
    return x


max_contiguous = max_constancy = multiple_of


binding.bind_operators(arith, sys.modules[__name__])  # tensor's operators call into these
