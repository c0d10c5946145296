"""The op table's semantics at the kernel line: the operands of a ``tl`` call classified
(handles, Python scalars), their result dtype, the axis and the output ``(shape, dtype)``
asked of ``schemas/rules.py`` (``OPS[op].sem`` under the KERNBENCH policy), every refusal a
KernelError naming the kernel line (docs/adr/0550-one-semantics-per-op-family.md)."""

from __future__ import annotations

from typing import Any

from kernbench.errors import DtypeError, KernelError, ScratchScopeError, ShapeError
from kernbench.record import hints
from kernbench.record.handle import TensorHandle
from kernbench.schemas import rules
from kernbench.schemas.dtypes import DType
from kernbench.schemas.ops import Op
from kernbench.schemas.policy import scalar_dtype


def live(h: Any, src: str, what: str = "operand") -> TensorHandle:
    """``h`` if it is a handle whose scratch scope is still open, else a KernelError."""
    if type(h) is not TensorHandle:
        raise KernelError(f"{what} must be a TensorHandle, got {type(h).__name__} {h!r}", src)
    s = h.buf.scope
    if s is not None and not s.alive:
        raise ScratchScopeError(
            f"{what} {list(h.shape)} {h.dtype.name} was allocated at {h.buf.src} inside a "
            f"scratch_scope (entered at {s.src}) that has exited; used here after the scope", src)
    return h


#: every argument's ``(dtype name, is a Python scalar)``, in position order
Operands = tuple[tuple[str, bool], ...]
_COUNT = {1: "one", 2: "two", 3: "three"}
_SCALARS = (int, float, bool)


def arguments(op: Op, args: tuple[Any, ...], src: str
               ) -> tuple[tuple[TensorHandle, ...], tuple[tuple[int, Any], ...], Operands]:
    """The handles, the Python scalars ``(position, value)`` and every argument's
    ``(dtype name, is a scalar)`` of an elementwise op; a KernelError for anything else."""
    hs, scalars, operands = [], [], []
    for pos, v in enumerate(args):
        if type(v) is TensorHandle:
            hs.append(live(v, src))
            operands.append((v.dtype.name, False))
        elif isinstance(v, _SCALARS) or hasattr(v, "item"):
            value = v.item() if hasattr(v, "item") else v
            scalars.append((pos, value))
            operands.append((scalar_dtype(value), True))
        else:
            raise KernelError(f"{op.value}: operand {v!r} is neither a handle nor a scalar"
                              f"{hints.operand(v)}", src)
    if not hs:
        raise KernelError(f"{op.value} of {_COUNT[len(args)]} scalars needs no kernel op", src)
    return tuple(hs), tuple(scalars), tuple(operands)


def result_dtype(op: Op, operands: Operands, src: str) -> DType:
    """The op table's result dtype (``schemas/semantics.py``, KERNBENCH policy) or a
    DtypeError at the kernel line (an integer-only op meeting floats)."""
    try:
        return rules.result_dtype(op, operands)
    except ValueError as exc:
        raise DtypeError(str(exc), src) from None


def axis_for(x: TensorHandle, ax: int, src: str) -> int:
    """``ax`` normalised for ``x`` (the op table's rule), or a ShapeError at the kernel line."""
    try:
        return rules.axis_of(x.shape, int(ax))
    except ValueError as exc:
        raise ShapeError(str(exc), src) from None


def infer(op: Op, x: TensorHandle, attrs: dict[str, Any], src: str
          ) -> tuple[tuple[int, ...], DType]:
    """The op table's output ``(shape, dtype)`` of a one-input op (``schemas/semantics.py``,
    KERNBENCH policy); a ShapeError (DtypeError for refused dtypes) at the kernel line."""
    try:
        got = rules.infer(op, [x.shape], [x.dtype], attrs)
    except rules.PromotionError as exc:
        raise DtypeError(str(exc), src) from None
    except ValueError as exc:
        raise ShapeError(str(exc), src) from None
    if got is None:  # pragma: no cover - every one-input family of the table infers
        raise KernelError(f"{op.value} has no inferred output", src)
    return got


