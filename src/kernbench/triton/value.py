"""``tl.tensor``: every value a Triton kernel body holds while it is recorded.

``tensor`` is the class kernels see (``isinstance(x, tl.tensor)``); every value is one of
its three subclasses (ADR-0620):
- ``Concrete``: values known now, a numpy array in the Triton dtype (index arithmetic);
- ``Pointer``: an HBM tensor plus element offsets, a concrete ``int64`` array or a symbolic
  TCM handle of integers from loaded data;
- ``Symbolic``: data known only in Phase 2, a ``record.handle.TensorHandle``.

The operators route to ``arith`` (Triton's promotion rules, concrete or recorded). When a
value holding a TCM handle dies, the handle is released (``record.lifetime``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex, SupportsInt

import numpy as np

from kernbench.errors import KernelError
from kernbench.record.handle import HbmTensor, TensorHandle
from kernbench.record.lowering.decide import decide
from kernbench.record.lowering.indexplan import Rel, canon, fits_int64
from kernbench.record.lowering.lifetime import release as _release
from kernbench.record.lowering.lifetime import retain as _retain
from kernbench.record.memo import BoundedMemo
from kernbench.record.source import mark_internal_dir, src_here
from kernbench.schemas import guards
from kernbench.triton import binding as _b
from kernbench.triton import dtypes as d
from kernbench.triton.dtypes import missing, pointer_type

mark_internal_dir(os.path.dirname(__file__))  # src lines name the kernel, not this package

#: a Python number a Triton function takes where it takes a tensor (a "weak" scalar)
Scalar = int | float | bool

#: Triton's ``tl.tensor`` members (3.8): a name outside is refused by Triton as well
TRITON_TENSOR_API = frozenset({
    "T", "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and",
    "atomic_cas", "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
    "broadcast_to", "cast", "cdiv", "ceil", "cos", "cumprod", "cumsum", "erf", "exp", "exp2",
    "expand_dims", "flip", "floor", "gather", "histogram", "item", "log", "log2", "logical_and",
    "logical_or", "max", "min", "permute", "ravel", "reduce", "reduce_or", "reshape", "rsqrt",
    "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "store", "sum", "to",
    "trans", "view", "xor_sum", "dtype", "shape", "type", "numel"})
#: the payload fields of the three kinds: never a Triton member
_FIELDS = frozenset({"value", "memo_key", "base", "offsets", "handle"})


class tensor:  # noqa: N801 - Triton's spelling
    """A Triton value: always a ``Concrete``, ``Pointer`` or ``Symbolic`` (module doc)."""

    __slots__ = ("dtype", "shape", "__weakref__")
    dtype: d.dtype | pointer_type
    shape: tuple[int, ...]

    if not TYPE_CHECKING:  # a checker sees only the members below, never a catch-all
        def __getattr__(self, name: str) -> object:  # only names the class lacks get here
            if name.startswith("__") or name in _FIELDS:
                raise AttributeError(name)
            raise missing("tl.tensor", name, name in TRITON_TENSOR_API)

    # -- introspection ------------------------------------------------------------------
    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def type(self) -> d.dtype | pointer_type:
        return self.dtype

    @property
    def T(self) -> Value:  # noqa: N802 - Triton's spelling
        return _b.core.trans(self)

    def __repr__(self) -> str:  # the kind by its class: pointer or symbolic
        return f"tl.tensor({type(self).__name__.lower()}, {list(self.shape)}, {self.dtype!r})"

    def to(self, dtype: object, fp_downcast_rounding: object = None, bitcast: bool = False
           ) -> Value:
        return _b.arith.cast(self, dtype, bitcast)

    # -- Python protocols Triton gives meaning to -----------------------------------------
    def __bool__(self) -> bool:
        raise KernelError(f"the truth value of a {list(self.shape)} block is ambiguous (Triton "
                          "accepts only scalars in an if)", src_here())

    def __index__(self) -> int:
        raise KernelError(f"{self!r} is not a concrete integer scalar", src_here())

    def __iter__(self) -> NoReturn:
        raise KernelError(f"a {list(self.shape)} block is not iterable", src_here())

    def __getitem__(self, key: object) -> Value:
        return _b.core.index(self, key)

    # -- arithmetic (Triton's promotion, concrete or recorded) -----------------------------
    def __add__(self, o: object) -> Value: return _b.arith.binary("add", self, o)
    def __radd__(self, o: object) -> Value: return _b.arith.binary("add", o, self)
    def __sub__(self, o: object) -> Value: return _b.arith.binary("sub", self, o)
    def __rsub__(self, o: object) -> Value: return _b.arith.binary("sub", o, self)
    def __mul__(self, o: object) -> Value: return _b.arith.binary("mul", self, o)
    def __rmul__(self, o: object) -> Value: return _b.arith.binary("mul", o, self)
    def __truediv__(self, o: object) -> Value: return _b.arith.binary("div", self, o)
    def __rtruediv__(self, o: object) -> Value: return _b.arith.binary("div", o, self)
    def __floordiv__(self, o: object) -> Value: return _b.arith.binary("floordiv", self, o)
    def __rfloordiv__(self, o: object) -> Value: return _b.arith.binary("floordiv", o, self)
    def __mod__(self, o: object) -> Value: return _b.arith.binary("mod", self, o)
    def __rmod__(self, o: object) -> Value: return _b.arith.binary("mod", o, self)
    def __and__(self, o: object) -> Value: return _b.arith.binary("and_", self, o)
    def __rand__(self, o: object) -> Value: return _b.arith.binary("and_", o, self)
    def __or__(self, o: object) -> Value: return _b.arith.binary("or_", self, o)
    def __ror__(self, o: object) -> Value: return _b.arith.binary("or_", o, self)
    def __xor__(self, o: object) -> Value: return _b.arith.binary("xor", self, o)
    def __rxor__(self, o: object) -> Value: return _b.arith.binary("xor", o, self)
    def __lshift__(self, o: object) -> Value: return _b.arith.binary("shl", self, o)
    def __rlshift__(self, o: object) -> Value: return _b.arith.binary("shl", o, self)
    def __rshift__(self, o: object) -> Value: return _b.arith.binary("shr", self, o)
    def __rrshift__(self, o: object) -> Value: return _b.arith.binary("shr", o, self)
    def __lt__(self, o: object) -> Value: return _b.arith.binary("lt", self, o)
    def __le__(self, o: object) -> Value: return _b.arith.binary("le", self, o)
    def __gt__(self, o: object) -> Value: return _b.arith.binary("gt", self, o)
    def __ge__(self, o: object) -> Value: return _b.arith.binary("ge", self, o)
    def __eq__(self, o: object) -> Value: return _b.arith.binary("eq", self, o)  # type: ignore[override, unused-ignore]
    def __ne__(self, o: object) -> Value: return _b.arith.binary("ne", self, o)  # type: ignore[override, unused-ignore]
    def __neg__(self) -> Value: return _b.arith.unary("neg", self)
    def __pos__(self) -> tensor: return self
    def __abs__(self) -> Value: return _b.arith.unary("abs", self)
    def __invert__(self) -> Value: return _b.arith.invert(self)

    __hash__ = object.__hash__


class Concrete(tensor):
    """Values known while recording: ``value`` is a numpy array of ``dtype``, never written
    once a value holds it; ``memo_key``: its memo key once computed (``arith``), else None."""

    __slots__ = ("value", "memo_key")
    dtype: d.dtype

    def __init__(self, dt: d.dtype, value: np.ndarray, key: tuple | None = None) -> None:
        self.dtype, self.shape, self.value, self.memo_key = dt, value.shape, value, key

    def __repr__(self) -> str:
        return f"tl.tensor({self.value!r}, {self.dtype.name})"

    def __bool__(self) -> bool:
        if self.shape == ():
            return bool(self.value)
        return super().__bool__()

    def __index__(self) -> int:
        if self.shape == () and self.dtype.is_int():
            return int(self.value)
        return super().__index__()


class Symbolic(tensor):
    """Data known only in Phase 2: ``handle`` is the TCM buffer view holding it. ``known``:
    its value once the kernel decided on it (``if``, ``range``, ``int()`` ...: a guard row
    pins its exact bits, ADR-0840), from then on computed with as index arithmetic."""

    __slots__ = ("handle", "known")
    dtype: d.dtype

    def __init__(self, dt: d.dtype, h: TensorHandle) -> None:
        self.dtype, self.shape, self.handle = dt, tuple(h.shape), h
        self.known: Concrete | None = None
        _retain(h)  # this value refers to the buffer until it dies (record.lifetime)

    def __del__(self) -> None:
        try:
            _release(self.handle)
        except Exception:  # noqa: BLE001, S110 - never raise from a finaliser
            pass

    def decided(self, what: str) -> Concrete:
        """This scalar's value, decided on at the kernel's line (a guard row); kept."""
        if self.known is not None:
            return self.known
        src = src_here()
        if self.shape != ():
            raise KernelError(f"{what} needs a scalar; the truth value of a "
                              f"{list(self.shape)} block is ambiguous (Triton accepts only "
                              "scalars)", src)
        bits = decide(self.handle, src, what)
        if self.dtype.name == "bfloat16":  # its storage, not a numpy value: decided, not pinned
            return Concrete(d.float32, np.asarray(
                guards.value(guards.encode(bits), "bfloat16"), np.float32).reshape(()))
        self.known = Concrete(self.dtype, bits.view(self.dtype.np).reshape(()).copy())
        return self.known

    def __bool__(self) -> bool:
        return bool(self.decided("an if/while on data"))

    def __index__(self) -> int:
        v = self.decided("a loop bound or index from data")
        if not v.dtype.is_int():
            raise KernelError(f"{self!r} is not an integer", src_here())
        return int(v.value)

    def __int__(self) -> int:
        return int(self.decided("int() of data").value)

    def __float__(self) -> float:
        return float(self.decided("float() of data").value)


def settled(x: Any) -> Any:
    """``x``, or the concrete value a decision pinned it to (a ``Symbolic`` decided on)."""
    return x.known if type(x) is Symbolic and x.known is not None else x


#: one ``pointer_type`` per element type (immutable), shared by every pointer value
_POINTER_TYPES: dict[d.dtype, pointer_type] = {}


class Pointer(tensor):
    """Addresses into the HBM tensor ``base``: element ``offsets``, concrete (``int64``) or a
    TCM handle of integers from loaded data (a gather or scatter)."""

    __slots__ = ("base", "offsets", "rel")
    dtype: pointer_type

    def __init__(self, elem: d.dtype, base: HbmTensor, offsets: np.ndarray | TensorHandle
                 ) -> None:
        pt = _POINTER_TYPES.get(elem)
        if pt is None:
            pt = _POINTER_TYPES[elem] = pointer_type(elem)
        self.dtype, self.shape = pt, tuple(offsets.shape)
        self.base, self.offsets = base, offsets
        #: concrete offsets' relative offsets and extent once known (``indexplan.Known``)
        self.rel: Rel | None = None
        if type(offsets) is TensorHandle:
            _retain(offsets)

    # a pointer advanced by a scalar keeps its relative offsets: carried over (ADR-0690)
    def __add__(self, o: object) -> Value: return _carry(self, _b.arith.binary("add", self, o), o)
    def __radd__(self, o: object) -> Value: return _carry(self, _b.arith.binary("add", o, self), o)
    def __sub__(self, o: object) -> Value:
        return _carry(self, _b.arith.binary("sub", self, o), o, block=False)

    def __del__(self) -> None:
        try:
            if type(self.offsets) is TensorHandle:
                _release(self.offsets)
        except Exception:  # noqa: BLE001, S110 - never raise from a finaliser
            pass


#: relative offsets of a pointer block plus a concrete integer block, by (the pointer's
#: relative-offsets key, the block's memo key): the programs of a launch and the steps of a
#: loop add the same blocks (``_block_rel``)
_RELS = BoundedMemo()
RELS_LIMIT = 512
RELS_BYTES = 16 << 20
_ZERO = ((), np.zeros((), np.int64).tobytes())  # the relative offsets of a scalar


def _carry(p: Pointer, r: Value, o: object, block: bool = True) -> Value:
    """``r`` (``p`` +/- ``o``) told its relative offsets when they follow from ``p``'s:
    ``o`` a scalar (shifted by the difference of the first offsets), or ``p`` plus a
    memoised signed integer block (``_block_rel``; ``block`` False: ``o`` was subtracted);
    only while no offset wraps int64."""
    if type(r) is not Pointer or type(r.offsets) is not np.ndarray:
        return r
    o = plain(o)
    rel, offs = p.rel, p.offsets
    if rel is None and p.shape == () and type(offs) is np.ndarray:
        rel = (_ZERO, int(offs), int(offs))
    if rel is None:
        return r
    if r.shape == p.shape and (type(o) in (int, bool) or isinstance(o, np.integer)
                               or (type(o) is Concrete and o.value.size == 1)):
        d = int(r.offsets.flat[0]) - int(offs.flat[0])  # type: ignore[union-attr]
        key, lo, hi = rel[0], rel[1] + d, rel[2] + d
    elif block and type(o) is Concrete and o.memo_key is not None \
            and o.value.dtype.kind == "i":
        got = _block_rel(rel, o, r.offsets)
        if got is None:
            return r
        key, lo, hi = got
    else:
        return r
    if fits_int64(lo, hi):
        r.rel = (key, lo, hi)
    return r


def _block_rel(rel: Rel, o: Concrete, out: np.ndarray) -> Rel | None:
    """``out`` = offsets ``rel`` describes + ``o``'s values: its ``Rel``, or None when an
    offset may have wrapped. Remembered as (key, lowest and highest relative to ``rel``'s
    lowest, ``o``'s lowest and highest)."""
    mk = (rel[0], o.memo_key)
    got = _RELS.get(mk)
    lo, hi = rel[1], rel[2]
    if got is None:
        v = o.value
        omin, omax = int(v.min()), int(v.max())
        if not fits_int64(lo + omin, hi + omax):
            return None  # out may have wrapped: not remembered
        rlo, rhi = int(out.min()), int(out.max())
        got = ((out.shape, canon(out - rlo, RELS_LIMIT, RELS_BYTES)), rlo - lo, rhi - lo,
               omin, omax)
        _RELS.keep(mk, got, 2 * out.nbytes, RELS_LIMIT, RELS_BYTES)
    key, dlo, dhi, omin, omax = got
    if not fits_int64(lo + omin, hi + omax):
        return None
    return key, lo + dlo, lo + dhi


#: every value a kernel holds is one of the three (a checker narrows it by ``isinstance``)
Value = Concrete | Pointer | Symbolic
VALUES = (Concrete, Pointer, Symbolic)
#: what a Triton function takes where Triton takes a value: a tensor or a Python number
Operand = Value | Scalar
#: an operand of arithmetic: numbers, not addresses
Numeric = Concrete | Symbolic | Scalar


# -- constructors -------------------------------------------------------------------------
def concrete(values: np.ndarray | Scalar | np.generic, dt: d.dtype | None = None) -> Concrete:
    """Concrete values (index arithmetic); ``dt`` defaults to the array's Triton dtype."""
    v = np.asarray(values)
    if dt is None:
        dt = d.from_numpy(v.dtype)
    elif v.dtype != dt.np:
        v = v.astype(dt.np)
    return Concrete(dt, v)


def symbolic(h: TensorHandle, dt: d.dtype | None = None) -> Symbolic:
    """Wrap a TCM handle a data op returned (exactly one wrapper per handle)."""
    return Symbolic(dt or d.from_kb(h.dtype), h)


def pointer(base: HbmTensor, offsets: np.ndarray | TensorHandle, elem: d.dtype) -> Pointer:
    if type(offsets) is not TensorHandle:
        offsets = np.asarray(offsets, dtype=np.int64)
    return Pointer(elem, base, offsets)


def at(src: str | None) -> str:
    """``src``, or the kernel's line looked up now when the caller has not needed it so far
    (only tl layers lie between here and the kernel: the line of the call)."""
    return src if src is not None else src_here()


def plain(x: object) -> Any:  # a constexpr holds anything: each caller checks its use
    """A ``tl.constexpr`` (ours or Triton's) as its value; anything else unchanged."""
    while type(x).__name__ == "constexpr" and hasattr(x, "value"):
        x = x.value
    return x


def int_value(x: object, what: str, src: str) -> int:
    """``x`` (a Python number, a constexpr, a concrete integer scalar, or an integer scalar
    of data: decided on, a guard row) as an int."""
    x = plain(x)
    if type(x) is Symbolic and x.shape == () and x.dtype.is_int():
        return x.__index__()
    if isinstance(x, tensor):
        if not isinstance(x, Concrete) or x.shape != () or not x.dtype.is_int():
            raise KernelError(f"{what} {x!r} must be a concrete integer scalar", src)
        return int(x.value)
    if isinstance(x, SupportsInt | SupportsIndex):
        return int(x)
    raise KernelError(f"{what} {x!r} must be an integer", src)
