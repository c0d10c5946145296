"""Triton's element types as the front end sees them, and their kernbench/numpy equivalents.

A ``dtype`` here is Triton's (``tl.int64``, ``tl.uint8`` ... exist for index arithmetic); only
the ones kernbench's trace format knows can hold data (``kb``). Calling a dtype as a value
constructor (``tl.float32(1.0)``) is refused, as Triton's compiler refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import numpy as np
import numpy.typing as npt

from kernbench.errors import DtypeError, KernelError, UnsupportedError
from kernbench.record.source import src_here
from kernbench.schemas import dtypes as kb_dtypes
from kernbench.schemas import policy
from kernbench.schemas.dtypes import DType
from kernbench.schemas.ops import OPS, Op
from kernbench.schemas.policy import TRITON, PromotionError
from kernbench.schemas.semantics import Elementwise, Fn


def missing(owner: str, name: str, known: bool) -> UnsupportedError:
    """``x.name`` kernbench's tensor or dtype lacks: a KernelError at the kernel's line (an
    UnsupportedError is an AttributeError too, so ``hasattr`` keeps working)."""
    why = ("kernbench's Triton front end does not implement it" if known else
           f"Triton's {owner} has no attribute {name!r} either")
    return UnsupportedError(f"{owner}.{name} is not supported by kernbench: {why}", src_here())


class dtype:  # noqa: N801 - Triton's spelling
    """One Triton element type: its name (``int32``), short name (``i32``), numpy dtype."""

    __slots__ = ("name", "short", "np", "kind", "bits")

    def __init__(self, name: str, short: str, np_dtype: npt.DTypeLike | None, kind: str,
                 bits: int = 0) -> None:
        self.name, self.short, self.kind = name, short, kind
        if np_dtype is not None:  # None: bfloat16, whose numpy dtype is made on first use
            self.np = np.dtype(np_dtype)
        self.bits = 1 if name == "int1" else bits or self.np.itemsize * 8

    # Triton's introspection API
    def is_floating(self) -> bool:
        return self.kind == "f"

    def is_int(self) -> bool:
        return self.kind in "biu"

    def is_int_signed(self) -> bool:
        return self.kind == "i"

    def is_int_unsigned(self) -> bool:
        return self.kind in "ub"  # Triton counts int1 unsigned

    def is_bool(self) -> bool:
        return self.kind == "b"

    def is_ptr(self) -> bool:
        return False

    def is_block(self) -> bool:
        return False

    def is_standard_floating(self) -> bool:
        return self.kind == "f"

    def is_fp8(self) -> bool:
        return False

    def is_void(self) -> bool:
        return False

    def is_const(self) -> bool:
        return False

    @staticmethod
    def is_dtype(type_str: str) -> bool:
        return type_str in DTYPES

    def codegen_name(self) -> str:
        return self.name

    def get_int_max_value(self) -> int:
        return 2 ** (self.bits - 1) - 1 if self.kind == "i" else 2 ** self.bits - 1

    def get_int_min_value(self) -> int:
        return -2 ** (self.bits - 1) if self.kind == "i" else 0

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    @property
    def exponent_bias(self) -> int:
        return _FP_BITS[self.name][1]

    @property
    def fp_mantissa_width(self) -> int:
        return _FP_BITS[self.name][0]

    @property
    def value(self) -> dtype:
        """``DTYPE.value`` of a ``tl.constexpr`` parameter holding a dtype (Triton keeps
        ``.value`` on constexprs for backward compatibility)."""
        return self

    @property
    def primitive_bitwidth(self) -> int:
        return self.bits

    @property
    def int_bitwidth(self) -> int:
        return self.bits

    @property
    def scalar(self) -> dtype:
        return self

    if not TYPE_CHECKING:  # a checker sees only the members above
        def __getattr__(self, name: str) -> object:  # only names the class lacks get here
            """``np`` of bfloat16 (``ml_dtypes.bfloat16``) is made on first use: importing
            ``ml_dtypes`` costs a second, so a kernel that never touches bfloat16 never pays
            it. Triton's other dtype members are refused by name."""
            if name == "np":
                import ml_dtypes

                self.np = np.dtype(ml_dtypes.bfloat16)
                return self.np
            if name.startswith("__") or name in dtype.__slots__:
                raise AttributeError(name)
            raise missing("tl.dtype", name, name in _TRITON_DTYPE_API)

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise KernelError(f"tl.{self.name}({', '.join(map(repr, args))}) calls a dtype as a value "
                          "constructor, which Triton's compiler rejects; use a Python literal, "
                          f"tl.full(..., dtype=tl.{self.name}) or x.to(tl.{self.name})", src_here())

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):  # pragma: no cover - singletons
        return (by_name, (self.name,))


#: Triton's ``tl.dtype`` members (3.8) kernbench does not define
_TRITON_DTYPE_API = frozenset({"FP_TYPES", "KIND", "OTHER_TYPES", "SIGNEDNESS", "SINT_TYPES",
                               "STANDARD_FP_TYPES", "UINT_TYPES", "cache_key_part", "mangle",
                               "to_ir", "with_element_ty", "int_signedness"})
#: float name -> (mantissa width, exponent bias)
_FP_BITS = {"float16": (10, 15), "bfloat16": (7, 127), "float32": (23, 127), "float64": (52, 1023)}
#: Triton's ``dtype.is_<x>()`` predicates -> the dtype name each tests for
_IS = {"is_int1": "int1", "is_int8": "int8", "is_int16": "int16", "is_int32": "int32",
       "is_int64": "int64", "is_uint8": "uint8", "is_uint16": "uint16", "is_uint32": "uint32",
       "is_uint64": "uint64", "is_fp16": "float16", "is_bf16": "bfloat16",
       "is_fp32": "float32", "is_fp64": "float64"}
for _pred, _name in _IS.items():
    setattr(dtype, _pred, (lambda n: lambda self: self.name == n)(_name))
for _pred in ("is_fp8e4nv", "is_fp8e4b8", "is_fp8e4b15", "is_fp8e5", "is_fp8e5b16"):
    setattr(dtype, _pred, lambda self: False)  # kernbench holds no fp8 type


class pointer_type:  # noqa: N801 - Triton's spelling
    """``tl.pointer_type(tl.float32)``: the type of a pointer value (``ptr.dtype``)."""

    __slots__ = ("element_ty",)

    def __init__(self, element_ty: dtype, address_space: int = 1) -> None:
        self.element_ty = element_ty

    def is_ptr(self) -> bool:
        return True

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    @property
    def scalar(self) -> pointer_type:
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, pointer_type) and other.element_ty is self.element_ty

    def __hash__(self) -> int:
        return hash(("ptr", self.element_ty.name))

    def __repr__(self) -> str:
        return f"pointer<{self.element_ty.name}>"


_TABLE = [("int1", "i1", np.bool_, "b"), ("int8", "i8", np.int8, "i"),
          ("int16", "i16", np.int16, "i"), ("int32", "i32", np.int32, "i"),
          ("int64", "i64", np.int64, "i"), ("uint8", "u8", np.uint8, "u"),
          ("uint16", "u16", np.uint16, "u"), ("uint32", "u32", np.uint32, "u"),
          ("uint64", "u64", np.uint64, "u"), ("float16", "fp16", np.float16, "f"),
          ("float32", "fp32", np.float32, "f"), ("float64", "fp64", np.float64, "f")]
DTYPES: dict[str, dtype] = {n: dtype(n, s, d, k) for n, s, d, k in _TABLE}
DTYPES["bfloat16"] = dtype("bfloat16", "bf16", None, "f", bits=16)  # numpy dtype: lazy
#: every spelling a dtype goes by: ours, Triton's short names, numpy's, kernbench's ``bool``
_ALIASES: dict[str, dtype] = {**DTYPES, **{d.short: d for d in DTYPES.values()},
                              "bool": DTYPES["int1"], "float": DTYPES["float32"],
                              "half": DTYPES["float16"]}
#: Triton dtype -> kernbench dtype name (the trace's); int1 is kernbench's bool
_KB_NAME = {"int1": "bool"}
#: numpy dtype -> Triton dtype; bfloat16 by name (``_from_np``: no ``ml_dtypes`` import)
_FROM_NP = {d.np: d for n, d in DTYPES.items() if n != "bfloat16"}

int1, int8, int16, int32, int64 = (DTYPES[n] for n in ("int1", "int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (DTYPES[n] for n in ("uint8", "uint16", "uint32", "uint64"))
float16, bfloat16, float32, float64 = (DTYPES[n] for n in ("float16", "bfloat16", "float32",
                                                           "float64"))


def by_name(name: object) -> dtype:
    """The Triton dtype for ``name``: ours, a real ``triton.language.dtype``, a numpy or
    kernbench dtype, or a string (``"fp32"``, ``"float32"``)."""
    if isinstance(name, dtype):
        return name
    if isinstance(name, DType):
        name = name.name
    elif not isinstance(name, str):
        npd = getattr(name, "np", name if isinstance(name, np.dtype | type) else None)
        if npd is not None:  # a dtype with a numpy equivalent (``.np``), or a numpy one
            try:
                return _from_np(np.dtype(npd))
            except (KeyError, TypeError):
                pass
        name = getattr(name, "name", name)
    try:
        return _ALIASES[str(name)]
    except KeyError:
        raise DtypeError(f"unknown dtype {name!r}", src_here()) from None


def _from_np(npd: np.dtype) -> dtype:
    if npd.name == "bfloat16" and npd == DTYPES["bfloat16"].np:  # ml_dtypes is loaded
        return DTYPES["bfloat16"]
    return _FROM_NP[npd]


def from_numpy(np_dtype: npt.DTypeLike) -> dtype:
    try:
        return _from_np(np.dtype(np_dtype))
    except KeyError:
        raise DtypeError(f"numpy dtype {np.dtype(np_dtype)} has no Triton dtype", src_here()
                         ) from None


def to_kb(dt: dtype, what: str = "data") -> DType:
    """The kernbench dtype that holds ``dt`` data, or a one-line DtypeError."""
    name = _KB_NAME.get(dt.name, dt.name)
    kb = kb_dtypes.DTYPES.get(name)
    if kb is None:
        why = kb_dtypes.WHY_NOT.get(name)
        raise DtypeError(f"{what} of dtype tl.{dt.name} is not supported by kernbench's trace "
                         f"format ({why + '; ' if why else ''}supported: "
                         f"{', '.join(sorted(kb_dtypes.DTYPES))})", src_here())
    return kb


#: the Triton dtype of each kernbench dtype name (kernbench's ``bool`` is int1)
_FROM_KB: dict[str, dtype] = {**DTYPES, "bool": DTYPES["int1"]}


def from_kb(kb: DType) -> dtype:
    return _FROM_KB[kb.name]


def of_scalar(x: object) -> dtype:
    """Triton's type of a Python literal (``to_tensor_type``): bool int1, int by range, float
    fp32."""
    if isinstance(x, bool | np.bool_):
        return int1
    if isinstance(x, int | np.integer):
        if isinstance(x, np.integer):
            return from_numpy(type(x))
        for lo, hi, dt in ((-2**31, 2**31, int32), (2**31, 2**32, uint32),
                           (-2**63, 2**63, int64), (2**63, 2**64, uint64)):
            if lo <= x < hi:
                return dt
        raise KernelError(f"integer {x} is not representable in 64 bits", src_here())
    if isinstance(x, np.floating):
        return from_numpy(type(x))
    return float32


# Triton's arithmetic rules on these dtypes: the op table's semantics (``OPS[op].sem``,
# ``schemas/semantics.py``) under the ``TRITON`` policy (``schemas/policy.py``: promotion with
# weak Python scalars, C-style integer ``//`` and ``%`` that refuse a zero divisor,
# wrap-around of fixed-width integers). No rule is defined here: these convert between
# Triton dtypes and the policy's dtype names.
def integer_promote(a: dtype, b: dtype) -> dtype:
    """C's usual arithmetic conversions between two integer types (no promotion to int32)."""
    return by_name(policy.integer_promote(a.name, b.name))


def computation_type(a: dtype, a_scalar: bool, b: dtype, b_scalar: bool,
                     div_or_mod: bool = False) -> dtype:
    """The dtype a binary op computes in (``TRITON.operands``)."""
    return by_name(TRITON.operands(((a.name, a_scalar), (b.name, b_scalar)), div_or_mod))


def truediv_type(a: dtype, a_scalar: bool, b: dtype, b_scalar: bool) -> dtype:
    """``/``: integers divide in fp32; otherwise the promoted float type."""
    return result_types("div", a, a_scalar, b, b_scalar)[0]


#: (min, max) of each integer dtype a Python scalar may meet (``check_scalar``)
_RANGE: dict[dtype, tuple[int, int]] = {}


def check_scalar(x: object, t: dtype) -> None:
    """A Python integer that meets an integer type must fit it (Triton raises otherwise)."""
    if t.is_int() and not t.is_bool() and isinstance(x, int | np.integer) and not isinstance(
            x, bool):
        bounds = _RANGE.get(t)
        if bounds is None:
            info = np.iinfo(t.np)
            bounds = _RANGE[t] = (int(info.min), int(info.max))
        if not bounds[0] <= int(x) <= bounds[1]:
            raise PromotionError(f"scalar {x} is out of range for type {t.name}")
        if x < 0 and t.kind == "u":
            raise PromotionError(f"cannot combine unsigned {t.name} with the negative scalar "
                                 f"{x}; cast one of them explicitly")


def cast(v: np.ndarray, t: dtype) -> np.ndarray:
    """Triton's cast of concrete values (``TRITON.store``): integers wrap, floats truncate
    toward zero into integers, anything nonzero is true."""
    return TRITON.store(np.asarray(v), t.np)


_SEMS: dict[str, Elementwise] = {}


def _sem(op: str) -> Elementwise:
    got = _SEMS.get(op)
    if got is None:
        s = OPS[Op(op)].sem
        if not isinstance(s, Elementwise):  # pragma: no cover - the front end names table ops
            raise PromotionError(f"{op} is not an elementwise op")
        got = _SEMS[op] = s
    return got


def result_types(op: str, a: dtype, a_scalar: bool, b: dtype, b_scalar: bool
                 ) -> tuple[dtype, dtype]:
    """(computation dtype, result dtype) of a binary table op, or PromotionError."""
    t, out = _sem(op).dtypes(((a.name, a_scalar), (b.name, b_scalar)), TRITON)
    return by_name(t), by_name(out)


#: each op's evaluator under the ``TRITON`` policy (an elementwise evaluator reads no attrs)
_EVALUATORS: dict[str, tuple[Fn, bool]] = {}


def evaluate(op: str, a: np.ndarray, b: np.ndarray, t: dtype, out: dtype) -> np.ndarray:
    """``a op b`` on concrete values already cast to ``t``, wrapping fixed-width integers
    (an integer ``//`` or ``%`` by zero is a ZeroDivisionError, as Triton)."""
    got = _EVALUATORS.get(op)
    if got is None:
        s = _sem(op)
        got = _EVALUATORS[op] = (s.evaluator({}, TRITON), s.divides)
    fn, divides = got
    if t.is_int() and not divides:  # integer ufuncs on arrays wrap silently: no errstate
        r = np.asarray(fn(a, b))
    else:
        with np.errstate(all="ignore"):
            r = np.asarray(fn(a, b))
    return r if r.dtype == out.np else cast(r, out)
