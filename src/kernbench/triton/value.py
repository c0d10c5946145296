"""``tl.tensor``: every value a Triton kernel body holds while it is recorded.

A tensor wraps exactly one of
- concrete values (``CONCRETE``: a numpy array in the Triton dtype; index arithmetic),
- a pointer (``POINTER``: an HBM tensor plus element offsets, concrete ``int64`` array or a
  symbolic TCM handle of integers from loaded data),
- symbolic data (``SYMBOLIC``: a ``record.handle.TensorHandle``; known only in Phase 2).

The operators route to ``arith`` (Triton's promotion rules, concrete or recorded). When a
wrapper of a symbolic handle dies, the handle is released (``record.lifetime``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.record.handle import HbmTensor, TensorHandle
from kernbench.record.lifetime import release as _release
from kernbench.record.lifetime import retain as _retain
from kernbench.record.source import mark_internal_dir, src_here
from kernbench.triton import dtypes as d
from kernbench.triton.dtypes import dtype, missing, pointer_type

CONCRETE, POINTER, SYMBOLIC = "concrete", "pointer", "symbolic"
mark_internal_dir(os.path.dirname(__file__))  # src lines name the kernel, not this package


#: Triton's ``tl.tensor`` members (3.8): a name outside is refused by Triton as well
TRITON_TENSOR_API = frozenset({
    "T", "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and",
    "atomic_cas", "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
    "broadcast_to", "cast", "cdiv", "ceil", "cos", "cumprod", "cumsum", "erf", "exp", "exp2",
    "expand_dims", "flip", "floor", "gather", "histogram", "item", "log", "log2", "logical_and",
    "logical_or", "max", "min", "permute", "ravel", "reduce", "reduce_or", "reshape", "rsqrt",
    "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "store", "sum", "to",
    "trans", "view", "xor_sum", "dtype", "shape", "type", "numel"})


class tensor:  # noqa: N801 - Triton's spelling
    """A Triton value; see the module docstring for the three kinds."""

    __slots__ = ("kind", "dtype", "shape", "value", "base", "__weakref__")

    def __init__(self, kind: str, dt: Any, shape: tuple[int, ...], value: Any,
                 base: HbmTensor | None = None) -> None:
        self.kind, self.dtype, self.shape, self.value, self.base = kind, dt, shape, value, base
        if type(value) is TensorHandle:
            _retain(value)  # this value refers to the buffer until it dies (record.lifetime)

    @property
    def hbm_base(self) -> HbmTensor:
        """The HBM tensor a pointer (or block pointer) value points into."""
        assert self.base is not None, "only a pointer value has an HBM base"
        return self.base

    def __del__(self) -> None:
        h = self.value
        if type(h) is TensorHandle:
            try:
                _release(h)
            except Exception:  # noqa: BLE001, S110 - never raise from a finaliser
                pass

    def __getattr__(self, name: str) -> Any:  # only names the class lacks get here
        if name.startswith("__") or name in tensor.__slots__:
            raise AttributeError(name)
        raise missing("tl.tensor", name, name in TRITON_TENSOR_API)

    # -- introspection ------------------------------------------------------------------
    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def type(self) -> Any:
        return self.dtype

    @property
    def T(self) -> tensor:  # noqa: N802 - Triton's spelling
        return _core.trans(self)

    def __repr__(self) -> str:
        if self.kind == CONCRETE:
            return f"tl.tensor({self.value!r}, {self.dtype.name})"
        return f"tl.tensor({self.kind}, {list(self.shape)}, {self.dtype!r})"

    def to(self, dtype: Any, fp_downcast_rounding: Any = None, bitcast: bool = False
           ) -> tensor:
        return _arith.cast(self, dtype, bitcast)

    # -- Python protocols Triton gives meaning to -----------------------------------------
    def __bool__(self) -> bool:
        src = src_here()
        if self.kind == SYMBOLIC:
            raise KernelError("Python control flow on loaded data (an if/while on a value that "
                              "came from tl.load) is not supported by kernbench: Phase 1 has no "
                              "data; use tl.where or a mask", src)
        if self.kind == CONCRETE and self.shape == ():
            return bool(self.value)
        raise KernelError(f"the truth value of a {list(self.shape)} block is ambiguous (Triton "
                          "accepts only scalars in an if)", src)

    def __index__(self) -> int:
        if self.kind == CONCRETE and self.shape == () and self.dtype.is_int():
            return int(self.value)
        raise KernelError(f"{self!r} is not a concrete integer scalar", src_here())

    def __iter__(self) -> Any:
        raise KernelError(f"a {list(self.shape)} block is not iterable", src_here())

    def __getitem__(self, key: Any) -> tensor:
        return _core.index(self, key)

    # -- arithmetic (Triton's promotion, concrete or recorded) -----------------------------
    def __add__(self, o): return _arith.binary("add", self, o)
    def __radd__(self, o): return _arith.binary("add", o, self)
    def __sub__(self, o): return _arith.binary("sub", self, o)
    def __rsub__(self, o): return _arith.binary("sub", o, self)
    def __mul__(self, o): return _arith.binary("mul", self, o)
    def __rmul__(self, o): return _arith.binary("mul", o, self)
    def __truediv__(self, o): return _arith.binary("div", self, o)
    def __rtruediv__(self, o): return _arith.binary("div", o, self)
    def __floordiv__(self, o): return _arith.binary("floordiv", self, o)
    def __rfloordiv__(self, o): return _arith.binary("floordiv", o, self)
    def __mod__(self, o): return _arith.binary("mod", self, o)
    def __rmod__(self, o): return _arith.binary("mod", o, self)
    def __and__(self, o): return _arith.binary("and_", self, o)
    def __rand__(self, o): return _arith.binary("and_", o, self)
    def __or__(self, o): return _arith.binary("or_", self, o)
    def __ror__(self, o): return _arith.binary("or_", o, self)
    def __xor__(self, o): return _arith.binary("xor", self, o)
    def __rxor__(self, o): return _arith.binary("xor", o, self)
    def __lshift__(self, o): return _arith.binary("shl", self, o)
    def __rlshift__(self, o): return _arith.binary("shl", o, self)
    def __rshift__(self, o): return _arith.binary("shr", self, o)
    def __rrshift__(self, o): return _arith.binary("shr", o, self)
    def __lt__(self, o): return _arith.binary("lt", self, o)
    def __le__(self, o): return _arith.binary("le", self, o)
    def __gt__(self, o): return _arith.binary("gt", self, o)
    def __ge__(self, o): return _arith.binary("ge", self, o)
    def __eq__(self, o): return _arith.binary("eq", self, o)  # type: ignore[override, unused-ignore]
    def __ne__(self, o): return _arith.binary("ne", self, o)  # type: ignore[override, unused-ignore]
    def __neg__(self): return _arith.unary("neg", self)
    def __pos__(self): return self
    def __abs__(self): return _arith.unary("abs", self)
    def __invert__(self): return _arith.invert(self)

    __hash__ = object.__hash__


# -- constructors -------------------------------------------------------------------------
def concrete(values: Any, dt: dtype | None = None) -> tensor:
    """Concrete values (index arithmetic); ``dt`` defaults to the array's Triton dtype."""
    v = np.asarray(values)
    if dt is None:
        dt = d.from_numpy(v.dtype)
    elif v.dtype != dt.np:
        v = v.astype(dt.np)
    return tensor(CONCRETE, dt, v.shape, v)


def symbolic(h: TensorHandle, dt: dtype | None = None) -> tensor:
    """Wrap a TCM handle a data op returned (exactly one wrapper per handle)."""
    return tensor(SYMBOLIC, dt or d.from_kb(h.dtype), tuple(h.shape), h)


def pointer(base: HbmTensor, offsets: np.ndarray | TensorHandle, elem: dtype) -> tensor:
    if type(offsets) is not TensorHandle:
        offsets = np.asarray(offsets, dtype=np.int64)
    shape = tuple(offsets.shape)
    return tensor(POINTER, pointer_type(elem), shape, offsets, base)


def plain(x: Any) -> Any:
    """A ``tl.constexpr`` (ours or Triton's) as its value; anything else unchanged."""
    while hasattr(x, "value") and type(x).__name__ == "constexpr":
        x = x.value
    return x


def int_value(x: Any, what: str, src: str) -> int:
    """``x`` (a Python number, a constexpr or a concrete integer scalar) as an int."""
    x = plain(x)
    if type(x) is tensor:
        if x.kind != CONCRETE or x.shape != () or not x.dtype.is_int():
            raise KernelError(f"{what} {x!r} must be a concrete integer scalar", src)
        return int(x.value)
    return int(x)


def is_tensor(x: Any) -> bool:
    return type(x) is tensor


class _Unbound:
    """Stands in for arith/core until core.py binds them (as record/handle.py does)."""

    def __getattr__(self, name: str) -> Any:
        raise KernelError("Triton tensor operators need kernbench.triton.core; import "
                          "kernbench.triton.language")


#: the operators' implementation: arith.py and core.py sit above this module and bind
#: themselves here when core.py is imported (``bind_operators``)
_arith: Any = _Unbound()
_core: Any = _Unbound()


def bind_operators(arith: Any, core: Any) -> None:
    """Called once by core.py: route ``tensor``'s operators through arith and core."""
    global _arith, _core
    _arith, _core = arith, core
