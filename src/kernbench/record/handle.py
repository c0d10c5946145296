"""Values a kernel holds: HBM pointers, scratch buffers and the tensor handles viewing them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from kernbench.errors import KernelError
from kernbench.record.source import src_here
from kernbench.schemas.dtypes import DType
from kernbench.schemas.ops import Op

# enum members bound once: attribute access on an Enum class is slow on the per-op path
_ADD, _SUB, _MUL, _DIV = Op.ADD, Op.SUB, Op.MUL, Op.DIV
_LT, _LE, _GT, _GE, _EQ, _NE = Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE
_NEG, _ABS = Op.NEG, Op.ABS


class HbmTensor:
    """One HBM tensor of the case, as laid out for this recording."""

    __slots__ = ("name", "addr", "numel", "dtype", "shape", "pe")

    def __init__(self, name: str, addr: int, shape: tuple[int, ...], dtype: DType,
                 pe: int = 0) -> None:
        self.name, self.addr, self.shape, self.dtype, self.pe = name, addr, shape, dtype, pe
        n = 1
        for s in shape:
            n *= s
        self.numel = n


class Pointer:
    """A pointer to element ``offset`` of an HBM tensor; ``ptr + k`` moves by ``k`` elements."""

    __slots__ = ("tensor", "offset")

    def __init__(self, tensor: HbmTensor, offset: int = 0) -> None:
        self.tensor = tensor
        self.offset = offset

    def __add__(self, k: Any) -> Pointer:
        return Pointer(self.tensor, self.offset + (k if type(k) is int else _off(self, k)))

    __radd__ = __add__

    def __sub__(self, k: Any) -> Pointer:
        return Pointer(self.tensor, self.offset - (k if type(k) is int else _off(self, k)))

    @property
    def addr(self) -> int:
        return self.tensor.addr + self.offset * self.tensor.dtype.itemsize

    def __repr__(self) -> str:
        return f"Pointer({self.tensor.name}+{self.offset})"


class Scope:
    """One active ``scratch_scope``: its save-point and whether it has exited."""

    __slots__ = ("saved", "alive", "src", "depth")

    def __init__(self, saved: int, src: str, depth: int) -> None:
        self.saved, self.alive, self.src, self.depth = saved, True, src, depth


class Buffer:
    """Bytes in TCM or staging. ``ready_ps`` is the slot for a pending completion: the time
    the last write into it (a lazy load, a ``recv_async``) becomes visible; readers and
    writers wait for it. ``read_until`` is when an in-flight send stops reading it; only
    writers wait for that. A buffer reusing freed bytes starts with ``read_until`` = when
    those bytes' previous occupant was last touched. ``owner`` is the lease of a buffer
    allocated in lifetime mode (``record/lowering/lifetime.py``), None under the bump allocator."""

    __slots__ = ("space", "pe", "addr", "nbytes", "scope", "src", "ready_ps", "event",
                 "read_until", "owner", "val")

    def __init__(self, space: str, pe: int, addr: int, nbytes: int, scope: Scope | None,
                 src: str) -> None:
        self.space, self.pe, self.addr, self.nbytes = space, pe, addr, nbytes
        self.scope, self.src = scope, src
        self.ready_ps = 0
        self.event = None  # the pending recv_async resolution, until its message matches
        self.read_until = 0  # an outgoing transfer (send) reads it until then: writers wait
        self.owner: Any = None  # the lifetime-mode lease (refcount, pipeline ring), if any
        #: in a recording with guards, the value-graph node of the op that last wrote these
        #: bytes (``record/guards/graph.py``); None otherwise
        self.val: Any = None


_OPERANDS: dict[tuple, tuple] = {}  # intern cache of operand tuples (see TensorHandle)
_OPERANDS_MAX = 1 << 16


class TensorHandle:
    """A view of a buffer: shape, dtype and whether it is a transposed view.

    ``nbytes`` is derived from shape and dtype. Views share their buffer, so a pending
    completion seen through one view is seen through all of them.
    """

    __slots__ = ("buf", "shape", "dtype", "transposed", "operand")

    def __init__(self, buf: Buffer, shape: tuple[int, ...], dtype: DType,
                 transposed: bool = False) -> None:
        self.buf, self.shape, self.dtype, self.transposed = buf, shape, dtype, transposed
        #: the operand as the op log stores it (space, pe, addr, shape, dtype, transposed),
        #: interned so the writer can tell equal operands apart by identity
        key = (buf.space, buf.pe, buf.addr, shape, dtype.name, transposed)
        operand = _OPERANDS.get(key)
        if operand is None:
            if len(_OPERANDS) >= _OPERANDS_MAX:  # a cache: forgetting only costs duplicates
                _OPERANDS.clear()
            operand = _OPERANDS[key] = key
        self.operand = operand

    @property
    def space(self) -> str:
        return self.buf.space

    @property
    def pe(self) -> int:
        return self.buf.pe

    @property
    def addr(self) -> int:
        return self.buf.addr

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def T(self) -> TensorHandle:  # noqa: N802 - numpy spelling
        return _sem.trans(self)

    def to(self, dtype: DType) -> TensorHandle:
        return _sem.cast(self, dtype)

    def __repr__(self) -> str:
        t = ", transposed" if self.transposed else ""
        return (f"TensorHandle({self.buf.space}@pe{self.buf.pe}+{self.buf.addr:#x}, "
                f"{list(self.shape)}, {self.dtype.name}{t})")

    # elementwise arithmetic and comparisons (numpy broadcasting, scalars on either side)
    def __add__(self, o): return _sem.binary(_ADD, self, o)
    def __radd__(self, o): return _sem.binary(_ADD, o, self)
    def __sub__(self, o): return _sem.binary(_SUB, self, o)
    def __rsub__(self, o): return _sem.binary(_SUB, o, self)
    def __mul__(self, o): return _sem.binary(_MUL, self, o)
    def __rmul__(self, o): return _sem.binary(_MUL, o, self)
    def __truediv__(self, o): return _sem.binary(_DIV, self, o)
    def __rtruediv__(self, o): return _sem.binary(_DIV, o, self)
    def __lt__(self, o): return _sem.binary(_LT, self, o)
    def __le__(self, o): return _sem.binary(_LE, self, o)
    def __gt__(self, o): return _sem.binary(_GT, self, o)
    def __ge__(self, o): return _sem.binary(_GE, self, o)
    def __eq__(self, o): return _sem.binary(_EQ, self, o)
    def __ne__(self, o): return _sem.binary(_NE, self, o)
    def __neg__(self): return _sem.unary(_NEG, self)
    def __abs__(self): return _sem.unary(_ABS, self)

    __hash__ = object.__hash__

    # a decision on data (ADR-0840): a guard row, and the path the value takes
    def __bool__(self) -> bool:
        return _decisions[0](self)

    def __index__(self) -> int:
        return _decisions[1](self)

    def __int__(self) -> int:
        return _decisions[1](self)

    def __float__(self) -> float:
        return _decisions[2](self)


def _unbound(x: Any) -> Any:
    raise KernelError("a decision on a TensorHandle needs the tl front end; import "
                      "kernbench.tl")


#: bool(), int() and float() of a handle: record/lowering/decide.py binds them
_decisions: tuple[Callable[[Any], bool], Callable[[Any], int], Callable[[Any], float]] = (
    _unbound, _unbound, _unbound)


def bind_decisions(truth: Callable[[Any], bool], integer: Callable[[Any], int],
                   real: Callable[[Any], float]) -> None:
    """Called once by record/lowering/decide.py: ``bool``/``int``/``float`` of a handle."""
    global _decisions
    _decisions = (truth, integer, real)


@runtime_checkable
class FrontEnd(Protocol):
    """What TensorHandle's operators call: the kernel front end (``record/lowering/semantics.py``, a
    module, satisfies it). The data layer must not import it (it sits above)."""

    def binary(self, op: Op, x: Any, y: Any) -> TensorHandle: ...
    def unary(self, op: Op, x: TensorHandle) -> TensorHandle: ...
    def trans(self, x: TensorHandle) -> TensorHandle: ...
    def cast(self, x: TensorHandle, dtype: Any) -> TensorHandle: ...
    def src_here(self) -> str: ...


class _Unbound:
    """Stands in for the kernel front end until record/lowering/semantics.py binds itself."""

    @staticmethod
    def _refuse() -> KernelError:
        return KernelError("TensorHandle operators need the tl front end; import kernbench.tl")

    def binary(self, op: Op, x: Any, y: Any) -> TensorHandle:
        raise self._refuse()

    def unary(self, op: Op, x: TensorHandle) -> TensorHandle:
        raise self._refuse()

    def trans(self, x: TensorHandle) -> TensorHandle:
        raise self._refuse()

    def cast(self, x: TensorHandle, dtype: Any) -> TensorHandle:
        raise self._refuse()

    def src_here(self) -> str:
        raise self._refuse()


#: the kernel front end the operators call into; semantics binds itself when it is imported
_sem: FrontEnd = _Unbound()


def bind_front_end(front_end: object) -> None:
    """Called once by record/lowering/semantics.py (a module): route the operators above through it.
    A ``TypeError`` naming the missing operations if ``front_end`` lacks one of them."""
    global _sem
    if not isinstance(front_end, FrontEnd):
        missing = [name for name in ("binary", "unary", "trans", "cast", "src_here")
                   if not callable(getattr(front_end, name, None))]
        raise TypeError(f"{front_end!r} is not a kernel front end: it lacks {missing}")
    _sem = front_end


POINTER_HELP = ("kernbench loads are (pointer, shape): a load reads prod(shape) contiguous "
                "elements at the pointer, so write `tl.load(ptr + start, (BLOCK,), dtype)` "
                "instead of Triton's `tl.load(ptr + tl.arange(0, BLOCK))`; pointer offsets "
                "are Python ints (elements), never tensors")


def _off(ptr: Any, k: Any) -> int:
    """The int offset of ``ptr + k``; a KernelError explaining (pointer, shape) loads when
    ``k`` is a tensor handle (Triton's ``ptr + tl.arange(...)``) or not an integer."""
    if isinstance(k, TensorHandle):
        raise KernelError(f"{ptr!r} + a {list(k.shape)} tensor: {POINTER_HELP}", src_here())
    try:
        if isinstance(k, float) and not k.is_integer():
            raise TypeError
        return int(k)
    except (TypeError, ValueError):
        raise KernelError(f"pointer offset {k!r} is not an int; {POINTER_HELP}",
                          src_here()) from None
