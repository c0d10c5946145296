"""Building blocks of the executors: the bind-time context and checks, readers of live
views (bfloat16/float16 read as float32), and elementwise steps over scalar templates."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np

from kernbench.replay.convert import BF16, bf16_to_f32
from kernbench.replay.store import NP_DTYPES, MemoryStore, Operand
from kernbench.schemas.elements import EMPTY, AccessTable

F32 = np.dtype(np.float32)
#: float dtypes computed in float32
LOW_FLOATS = frozenset({BF16, np.dtype(np.float16)})

Step = Callable[[], "np.ndarray | None"]
T = TypeVar("T")


@dataclass(frozen=True)
class BindContext:
    """What ``bind`` may need beyond the op's own operands."""

    store: MemoryStore
    pe: int
    #: the arrays of access.parquet (indexed rows, const values)
    access: AccessTable = EMPTY


Bind = Callable[[dict, Sequence[Operand], "Operand | None", BindContext], Step]


@dataclass(frozen=True)
class Executor:
    """How replay executes one op name: ``bind`` specialises it to one op's operands.

    ``writes`` False: the op's step has an effect of its own (or none) and its output
    operand, if the row has one, is not written by it (a composite parent's result is
    written by its children)."""

    bind: Bind
    writes: bool = True
    #: re-resolves the row's operands before ``bind`` (indexed rows: the HBM operand is a
    #: set of elements, not a contiguous range); returns (ins, out)
    operands: Callable[[dict, tuple, Any, BindContext], tuple[tuple, Any]] | None = None


class ShapeMismatch(ValueError):
    """Raised by ``bind`` when operands do not fit the op; replay reports it at the op."""


def need(cond: bool, message: str) -> None:
    if not cond:
        raise ShapeMismatch(f"Shape mismatch: {message}")


def arity(ins: Sequence[Operand], out: Operand | None, n_in: tuple[int, ...],
           name: str) -> Operand:
    """The output operand, once the op has one and ``n_in`` inputs (else ShapeMismatch)."""
    if len(ins) not in n_in:
        need(False, f"{name} takes {' or '.join(map(str, n_in))} inputs, got {len(ins)}")
    if out is None:
        raise ShapeMismatch(f"Shape mismatch: {name} has no output operand")
    return out


def compute_view(o: Operand, force_f32: bool = False) -> tuple[np.ndarray, bool]:
    """The operand's live view and whether it must be converted to float32 when read."""
    v = o.view
    if v is None:
        raise ShapeMismatch(f"Shape mismatch: operand {o.space}:{o.addr} is not placed")
    return v, bool(v.dtype != F32) if force_f32 else (v.dtype in LOW_FLOATS)


def reader(o: Operand, force_f32: bool = False) -> Callable[[], np.ndarray]:
    v, up = compute_view(o, force_f32)
    return upcast(v) if up else partial(same, v)


def upcast(v: np.ndarray) -> Callable[[], np.ndarray]:
    """A step reading the view ``v`` as a new float32 array (bfloat16 by a 16-bit shift)."""
    return partial(bf16_to_f32, v) if v.dtype == BF16 else partial(v.astype, F32)


def same(v: T) -> T:
    """The value itself (a step returning a live view, or a bound constant)."""
    return v


def nothing() -> None:
    return None


# -- elementwise with scalars -------------------------------------------------------------
def template(attrs: dict, ins: Sequence[Operand], arity: int, name: str
              ) -> tuple[list[Any], list[bool]]:
    """One entry per argument position (an input Operand or a Python scalar) and which of
    them are scalars."""
    scalars = attrs.get("scalars") or []
    if len(ins) + len(scalars) != arity:
        need(False, f"{name} needs {arity} arguments, has {len(ins)} inputs and "
                     f"{len(scalars)} scalars")
    slots: list[Any] = [None] * arity
    taken = [False] * arity
    for pos, value in scalars:
        need(0 <= int(pos) < arity and not taken[int(pos)], f"bad scalar position {pos}")
        slots[int(pos)], taken[int(pos)] = value, True
    readers = iter(ins)
    for k in range(arity):
        if not taken[k]:
            slots[k] = next(readers)
    return slots, taken


def check_broadcast(ins: Sequence[Operand], out: Operand, name: str) -> None:
    if all(o.shape == out.shape for o in ins):
        return
    try:
        shape = np.broadcast_shapes(*(o.shape for o in ins)) if ins else out.shape
    except ValueError:
        raise ShapeMismatch(f"Shape mismatch: {name} inputs {[list(o.shape) for o in ins]} do "
                            "not broadcast") from None
    if tuple(shape) != out.shape:
        need(False, f"{name} inputs broadcast to {list(shape)}, output is {list(out.shape)}")


def elementwise_step(fn: Callable[..., Any], slots: list, taken: list[bool]) -> Step:
    """``fn`` over the argument slots; a plain ``partial`` when no input needs a cast."""
    args: list[Any] = []
    casts: list[Any] = []
    for s, is_scalar in zip(slots, taken, strict=True):
        if is_scalar:
            args.append(s)
            casts.append(None)
        else:
            v, up = compute_view(s)
            args.append(v)
            casts.append(up)
    if not any(casts):
        return partial(fn, *args)
    readers = [partial(same, a) if not c else upcast(a)
               for a, c in zip(args, casts, strict=True)]
    return partial(call_read, fn, readers)


def call_read(fn: Callable[..., Any], readers: list) -> Any:
    return fn(*[r() for r in readers])


def numel(o: Operand) -> int:
    return o.nbytes // NP_DTYPES[o.dtype].itemsize

