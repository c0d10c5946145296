"""The op table: every op of the trace format and everything the code base knows about it.

``OPS[op]`` is an ``OpSpec``: name, kind, engine, cost class, dtype rule, arity, family
(which fixes the shape inference, the ``tl`` calling convention and the replay executor),
numpy implementation and docstring. The ``tl`` wrappers of table ops, the timing registry,
the record-side shape/dtype inference, the replay executors, the op groups below and the
parametrised tests are all derived from it. Adding an elementwise op (``tl.tanh``) is one
``Op`` member and one ``OPS`` entry here. Other modules ask membership of the groups; they
never compare op-name strings. See docs/adr/0003-one-op-table.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from types import SimpleNamespace
from typing import Any

import numpy as np

from kernbench.schemas import semantics as sm
from kernbench.schemas.oracles import cas, erf, fma, rsqrt, sigmoid, xchg
from kernbench.schemas.policy import c_floordiv, c_mod


class Kind(StrEnum):
    MEMORY = "memory"
    GEMM = "gemm"
    MATH = "math"
    IPCQ = "ipcq"
    SCOPE = "scope"
    COMPOSITE = "composite"
    CONTROL = "control"  # a guard: the kernel's path decided by a value (trace format 4.1)


class Engine(StrEnum):
    DMA_RD = "dma_rd"
    DMA_WR = "dma_wr"
    GEMM = "gemm"
    MATH = "math"
    LINK_TX = "link_tx"
    NONE = "none"


class Cost(StrEnum):
    """Which closed-form timing model prices the op (record/machine/timing.py,
    docs/hardware-model)."""

    FREE = "free"
    DMA_READ = "dma_read"
    DMA_WRITE = "dma_write"
    GEMM = "gemm"
    MATH = "math"  # ceil(elements / lanes) * op_cost + overhead
    TRANSCENDENTAL = "transcendental"  # ... * transcendental_cost + overhead
    SOFTMAX = "softmax"  # ... * math_softmax_cost + overhead
    LINK = "link"
    BRANCH = "branch"  # a guard: ``branch_cycles`` once its operand is visible


class Family(StrEnum):
    """The op's shape inference, tl calling convention and replay executor."""

    MEMORY = "memory"
    DOT = "dot"
    BINARY = "binary"  # elementwise f(x, y), numpy broadcasting, scalars on either side
    WHERE = "where"
    UNARY = "unary"  # elementwise f(x), same shape
    CAST = "cast"
    REDUCE = "reduce"  # ufunc.reduce over axis (keepdims)
    SOFTMAX = "softmax"
    COPY = "copy"
    BROADCAST = "broadcast"
    FILL = "fill"
    ARANGE = "arange"
    IPCQ = "ipcq"
    SCOPE = "scope"
    COMPOSITE = "composite"
    TERNARY = "ternary"  # elementwise f(x, y, z), numpy broadcasting, scalars anywhere (fma)
    SCAN = "scan"  # ufunc.accumulate along axis (reverse=), same shape (cumsum)
    ARG = "arg"  # index of the extreme along axis, first on ties, int32 (argmax)
    CONST = "const"  # concrete values stored once in access.parquet, materialised in TCM
    GATHER = "gather"  # HBM elements at offsets loaded in TCM -> TCM (lazy)
    SCATTER = "scatter"  # TCM values -> HBM elements at offsets loaded in TCM
    ATOMIC = "atomic"  # HBM read-modify-write at offsets; returns the old values (lazy)
    PHILOX = "philox"  # one word of Philox-4x32 of (seed, c0, c1, c2, c3) (schemas/philox.py)
    GUARD = "guard"  # a decision on data: the operand's value (``bits``) chose the path


class Dt(StrEnum):
    """Output dtype from the operand dtype (after promotion of the elementwise operands)."""

    SAME = "same"
    FLOAT = "float"  # integer operands compute in float32
    BOOL = "bool"
    INT32 = "int32"
    FLOAT32 = "float32"
    UINT32 = "uint32"
    ATTR = "attr"  # attrs["dtype"]
    GIVEN = "given"  # chosen by the kernel (the tensor's, or out_dtype=); not inferable


class Op(StrEnum):
    DMA_READ = "dma_read"
    DMA_WRITE = "dma_write"
    DOT = "dot"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    WHERE = "where"
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    ABS = "abs"
    NEG = "neg"
    TANH = "tanh"
    ERF = "erf"
    SIGMOID = "sigmoid"
    CAST = "cast"
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    SOFTMAX = "softmax"
    COPY = "copy"
    BROADCAST = "broadcast"
    FILL = "fill"
    ARANGE = "arange"
    SEND = "send"
    RECV = "recv"
    SCOPE_ENTER = "scope_enter"
    SCOPE_EXIT = "scope_exit"
    GEMM = "gemm"
    # trace format version 2 (docs/trace-format.md): ops of the Triton front end. New members
    # go at the end: the writer's name dictionary follows this order (goldens unchanged).
    CONST = "const"
    GATHER = "gather"
    SCATTER = "scatter"
    ATOMIC_ADD = "atomic_add"
    ATOMIC_MAX = "atomic_max"
    ATOMIC_MIN = "atomic_min"
    ATOMIC_XCHG = "atomic_xchg"
    ATOMIC_AND = "atomic_and"
    ATOMIC_OR = "atomic_or"
    ATOMIC_XOR = "atomic_xor"
    FMA = "fma"
    FLOORDIV = "floordiv"
    MOD = "mod"
    AND = "and_"
    OR = "or_"
    XOR = "xor"
    NOT = "not_"
    SHL = "shl"
    SHR = "shr"
    POW = "pow"
    LOG2 = "log2"
    FLOOR = "floor"
    CEIL = "ceil"
    COS = "cos"
    SIN = "sin"
    CUMSUM = "cumsum"
    CUMPROD = "cumprod"
    ARGMAX = "argmax"
    ARGMIN = "argmin"
    ATOMIC_CAS = "atomic_cas"
    PHILOX = "philox"
    # a guarded path (ADR-0840): a trace holding one is minor version 1 of its major
    GUARD = "guard"


@dataclass(frozen=True, slots=True)
class OpSpec:
    """Everything about one op. ``numpy``: the elementwise function (unary, binary, where) or
    the ufunc whose ``reduce`` a reduction is; None where the family defines the semantics.
    ``tl``: the op has a generated ``tl.<name>`` function (unary/binary/reduce families)."""

    op: Op
    kind: Kind
    engine: Engine
    cost: Cost
    family: Family
    dtype: Dt
    arity: int  # argument positions (handles or scalars); -1: variable
    doc: str
    numpy: Callable[..., np.ndarray] | None = None
    tl: bool = False
    #: integer (and bool) operands only: a float operand is a DtypeError at emit time
    ints: bool = False
    #: the family's semantics (shape/dtype inference, evaluation; ``schemas/semantics.py``),
    #: None where the output is not a function of the inputs
    sem: sm.Semantics | None = None


def _semantics(op: Op, family: Family, dtype: Dt, numpy: Callable[..., Any] | None,
               ints: bool) -> sm.Semantics | None:
    """The semantics object of one row: the family's class, the row's function and rule."""
    name = op.value
    rule = sm.result_rule(name, dtype.value, ints) if dtype.value in sm.RULES else None
    make = _SEMANTICS.get(family)
    return None if make is None else make(name, numpy, rule, op in _DIVIDES)


_DIVIDES = frozenset({"div", "floordiv", "mod"})
_SEMANTICS: dict[Family, Callable[..., sm.Semantics]] = {
    Family.BINARY: lambda n, f, r, d: sm.Elementwise(n, f, r, 2, divides=d),
    Family.TERNARY: lambda n, f, r, d: sm.Elementwise(n, f, r, 3),
    Family.WHERE: lambda n, f, r, d: sm.Elementwise(n, f, r, 3, where=True),
    Family.UNARY: lambda n, f, r, d: sm.Elementwise(n, f, r, 1),
    Family.CAST: lambda n, f, r, d: sm.Cast(n),
    Family.REDUCE: lambda n, f, r, d: sm.Reduce(n, f, r),
    Family.ARG: lambda n, f, r, d: sm.Arg(n, f, r),
    Family.SCAN: lambda n, f, r, d: sm.Scan(n, f, r),
    Family.SOFTMAX: lambda n, f, r, d: sm.Softmax(n, r),
    Family.BROADCAST: lambda n, f, r, d: sm.Broadcast(n),
    Family.COPY: lambda n, f, r, d: sm.Copy(n),
    Family.PHILOX: lambda n, f, r, d: sm.Philox(n),
}


def _spec(op: Op, family: Family, dtype: Dt, arity: int, doc: str,
          numpy: Callable[..., Any] | None = None, *, cost: Cost = Cost.MATH,
          tl: bool = False, kind: Kind = Kind.MATH, engine: Engine = Engine.MATH,
          ints: bool = False) -> OpSpec:
    if family in _NUMPY_DEFINED and not callable(numpy):
        raise TypeError(f"op {op.value!r} of family {family.value} needs its numpy function")
    return OpSpec(op, kind, engine, cost, family, dtype, arity, doc, numpy, tl, ints,
                  _semantics(op, family, dtype, numpy, ints))


#: families whose Phase 2 semantics is the entry's numpy function (required in the table)
_NUMPY_DEFINED = frozenset({Family.UNARY, Family.BINARY, Family.WHERE, Family.REDUCE,
                            Family.TERNARY, Family.SCAN, Family.ARG, Family.ATOMIC})


_T = Cost.TRANSCENDENTAL
_B, _U, _R = Family.BINARY, Family.UNARY, Family.REDUCE
_S = Dt.SAME

OPS: dict[Op, OpSpec] = {s.op: s for s in (
    _spec(Op.DMA_READ, Family.MEMORY, _S, 1, "HBM -> TCM/stage copy (a lazy tl.load)",
          kind=Kind.MEMORY, engine=Engine.DMA_RD, cost=Cost.DMA_READ),
    _spec(Op.DMA_WRITE, Family.MEMORY, Dt.GIVEN, 1, "TCM -> HBM, converted to the tensor dtype",
          kind=Kind.MEMORY, engine=Engine.DMA_WR, cost=Cost.DMA_WRITE),
    _spec(Op.DOT, Family.DOT, Dt.GIVEN, -1, "a @ b (+ acc), float32 accumulation",
          kind=Kind.GEMM, engine=Engine.GEMM, cost=Cost.GEMM),
    _spec(Op.ADD, _B, _S, 2, "x + y", np.add),
    _spec(Op.SUB, _B, _S, 2, "x - y", np.subtract),
    _spec(Op.MUL, _B, _S, 2, "x * y", np.multiply),
    _spec(Op.DIV, _B, Dt.FLOAT, 2, "x / y (true division)", np.true_divide, cost=_T),
    _spec(Op.MAXIMUM, _B, _S, 2, "elementwise maximum of x and y", np.maximum, tl=True),
    _spec(Op.MINIMUM, _B, _S, 2, "elementwise minimum of x and y", np.minimum, tl=True),
    _spec(Op.EQ, _B, Dt.BOOL, 2, "x == y", np.equal),
    _spec(Op.NE, _B, Dt.BOOL, 2, "x != y", np.not_equal),
    _spec(Op.LT, _B, Dt.BOOL, 2, "x < y", np.less),
    _spec(Op.LE, _B, Dt.BOOL, 2, "x <= y", np.less_equal),
    _spec(Op.GT, _B, Dt.BOOL, 2, "x > y", np.greater),
    _spec(Op.GE, _B, Dt.BOOL, 2, "x >= y", np.greater_equal),
    _spec(Op.WHERE, Family.WHERE, _S, 3, "cond ? x : y", np.where),
    _spec(Op.EXP, _U, Dt.FLOAT, 1, "e ** x", np.exp, cost=_T, tl=True),
    _spec(Op.EXP2, _U, Dt.FLOAT, 1, "2 ** x", np.exp2, cost=_T, tl=True),
    _spec(Op.LOG, _U, Dt.FLOAT, 1, "natural logarithm", np.log, cost=_T, tl=True),
    _spec(Op.SQRT, _U, Dt.FLOAT, 1, "square root", np.sqrt, cost=_T, tl=True),
    _spec(Op.RSQRT, _U, Dt.FLOAT, 1, "1 / sqrt(x)", rsqrt, cost=_T, tl=True),
    _spec(Op.ABS, _U, _S, 1, "absolute value", np.abs, tl=True),
    _spec(Op.NEG, _U, _S, 1, "-x", np.negative),
    _spec(Op.TANH, _U, Dt.FLOAT, 1, "hyperbolic tangent", np.tanh, cost=_T, tl=True),
    _spec(Op.ERF, _U, Dt.FLOAT, 1, "Gauss error function", erf, cost=_T, tl=True),
    _spec(Op.SIGMOID, _U, Dt.FLOAT, 1, "logistic 1 / (1 + exp(-x))", sigmoid, cost=_T, tl=True),
    _spec(Op.CAST, Family.CAST, Dt.ATTR, 1, "x.to(dtype)"),
    _spec(Op.SUM, _R, _S, 1, "sum over axis", np.add, tl=True),
    _spec(Op.MAX, _R, _S, 1, "maximum over axis", np.maximum, tl=True),
    _spec(Op.MIN, _R, _S, 1, "minimum over axis", np.minimum, tl=True),
    _spec(Op.SOFTMAX, Family.SOFTMAX, Dt.FLOAT, 1, "numerically stable softmax over axis",
          cost=Cost.SOFTMAX),
    _spec(Op.COPY, Family.COPY, _S, 1, "tl.copy_to: src's bytes into an existing TCM handle"),
    _spec(Op.BROADCAST, Family.BROADCAST, _S, 1, "np.broadcast_to(x, shape), materialised"),
    _spec(Op.FILL, Family.FILL, Dt.GIVEN, 0, "np.full(shape, value)"),
    _spec(Op.ARANGE, Family.ARANGE, Dt.INT32, 0, "np.arange(start, start + n), int32"),
    _spec(Op.SEND, Family.IPCQ, _S, 1, "TCM -> the receiver's ipcq slot",
          kind=Kind.IPCQ, engine=Engine.LINK_TX, cost=Cost.LINK),
    _spec(Op.RECV, Family.IPCQ, _S, 1, "ipcq slot -> TCM",
          kind=Kind.IPCQ, engine=Engine.NONE, cost=Cost.FREE),
    _spec(Op.SCOPE_ENTER, Family.SCOPE, Dt.GIVEN, 0, "scratch_scope entry (a save-point)",
          kind=Kind.SCOPE, engine=Engine.NONE, cost=Cost.FREE),
    _spec(Op.SCOPE_EXIT, Family.SCOPE, Dt.GIVEN, 0, "scratch_scope exit: tcm [lo, hi) rewound",
          kind=Kind.SCOPE, engine=Engine.NONE, cost=Cost.FREE),
    _spec(Op.GEMM, Family.COMPOSITE, Dt.FLOAT32, 2, "composite GEMM parent (children carry data)",
          kind=Kind.COMPOSITE, engine=Engine.NONE, cost=Cost.FREE),
    # -- version 2 ---------------------------------------------------------------------
    _spec(Op.CONST, Family.CONST, Dt.GIVEN, 0, "concrete values (access.parquet) into TCM"),
    _spec(Op.GATHER, Family.GATHER, Dt.GIVEN, -1, "HBM elements at offsets from TCM (lazy)",
          kind=Kind.MEMORY, engine=Engine.DMA_RD, cost=Cost.DMA_READ),
    _spec(Op.SCATTER, Family.SCATTER, Dt.GIVEN, -1, "TCM values to HBM offsets from TCM",
          kind=Kind.MEMORY, engine=Engine.DMA_WR, cost=Cost.DMA_WRITE),
    *[_spec(op, Family.ATOMIC, Dt.GIVEN, -1, f"HBM old = x; x = {doc}; returns old (lazy)",
            fn, kind=Kind.MEMORY, engine=Engine.DMA_WR, cost=Cost.DMA_WRITE, ints=ints)
      for op, doc, fn, ints in ((Op.ATOMIC_ADD, "old + v", np.add, False),
                                (Op.ATOMIC_MAX, "max(old, v)", np.maximum, False),
                                (Op.ATOMIC_MIN, "min(old, v)", np.minimum, False),
                                (Op.ATOMIC_XCHG, "v", xchg, False),
                                (Op.ATOMIC_AND, "old & v", np.bitwise_and, True),
                                (Op.ATOMIC_OR, "old | v", np.bitwise_or, True),
                                (Op.ATOMIC_XOR, "old ^ v", np.bitwise_xor, True))],
    _spec(Op.FMA, Family.TERNARY, _S, 3, "x * y + z, rounded once", fma),
    _spec(Op.FLOORDIV, _B, _S, 2, "x // y, C semantics (truncates toward zero)", c_floordiv,
          cost=_T, ints=True),
    _spec(Op.MOD, _B, _S, 2, "x % y, C semantics (sign of the dividend; fmod)", c_mod,
          cost=_T),
    _spec(Op.AND, _B, _S, 2, "x & y (bitwise; logical for bool)", np.bitwise_and, ints=True),
    _spec(Op.OR, _B, _S, 2, "x | y (bitwise; logical for bool)", np.bitwise_or, ints=True),
    _spec(Op.XOR, _B, _S, 2, "x ^ y (bitwise; logical for bool)", np.bitwise_xor, ints=True),
    _spec(Op.NOT, _U, _S, 1, "~x (bitwise; logical for bool)", np.invert, ints=True),
    _spec(Op.SHL, _B, _S, 2, "x << y", np.left_shift, ints=True),
    _spec(Op.SHR, _B, _S, 2, "x >> y (arithmetic for signed)", np.right_shift, ints=True),
    _spec(Op.POW, _B, Dt.FLOAT, 2, "x ** y", np.power, cost=_T),
    _spec(Op.LOG2, _U, Dt.FLOAT, 1, "base-2 logarithm", np.log2, cost=_T),
    _spec(Op.FLOOR, _U, Dt.FLOAT, 1, "round toward -inf", np.floor),
    _spec(Op.CEIL, _U, Dt.FLOAT, 1, "round toward +inf", np.ceil),
    _spec(Op.COS, _U, Dt.FLOAT, 1, "cosine", np.cos, cost=_T),
    _spec(Op.SIN, _U, Dt.FLOAT, 1, "sine", np.sin, cost=_T),
    _spec(Op.CUMSUM, Family.SCAN, _S, 1, "inclusive prefix sum along axis", np.add),
    _spec(Op.CUMPROD, Family.SCAN, _S, 1, "inclusive prefix product along axis", np.multiply),
    _spec(Op.ARGMAX, Family.ARG, Dt.INT32, 1, "index of the maximum along axis (first on ties)",
          np.argmax),
    _spec(Op.ARGMIN, Family.ARG, Dt.INT32, 1, "index of the minimum along axis (first on ties)",
          np.argmin),
    _spec(Op.ATOMIC_CAS, Family.ATOMIC, Dt.GIVEN, -1,
          "HBM old = x; x = v if old == cmp (bitwise) else old; returns old (lazy)", cas,
          kind=Kind.MEMORY, engine=Engine.DMA_WR, cost=Cost.DMA_WRITE),
    # priced as 8 lane operations per element and round (ADR-0860): the recorder's work
    _spec(Op.PHILOX, Family.PHILOX, Dt.UINT32, 5,
          "word attrs.word of Philox-4x32-n_rounds at counter (c0, c1, c2, c3) under seed"),
    _spec(Op.GUARD, Family.GUARD, Dt.GIVEN, 1,
          "a decision on data: the kernel's path follows its operand's value (attrs bits)",
          kind=Kind.CONTROL, engine=Engine.NONE, cost=Cost.BRANCH),
)}

#: the same members as plain attributes: ``Op.X`` goes through an enum descriptor, which is
#: too slow for the per-op path of record and replay; ``OP.X is Op.X``.
OP = SimpleNamespace(**Op.__members__)


def _where(pred: Callable[[OpSpec], bool]) -> frozenset[Op]:
    return frozenset(op for op, s in OPS.items() if pred(s))


BINARY = _where(lambda s: s.family is Family.BINARY)
COMPARISONS = _where(lambda s: s.family is Family.BINARY and s.dtype is Dt.BOOL)
TRANSCENDENTAL = _where(lambda s: s.cost is Cost.TRANSCENDENTAL)
UNARY = _where(lambda s: s.family in (Family.UNARY, Family.CAST))
REDUCTIONS = _where(lambda s: s.family is Family.REDUCE)
CREATION = _where(lambda s: s.family in (Family.FILL, Family.ARANGE))
MEMORY = _where(lambda s: s.kind is Kind.MEMORY)
IPCQ = _where(lambda s: s.kind is Kind.IPCQ)
SCOPE = _where(lambda s: s.kind is Kind.SCOPE)
MATH = _where(lambda s: s.kind is Kind.MATH)
#: ops whose kernel call returns before the op completes (the handle carries a pending time)
NON_BLOCKING = frozenset({Op.DMA_READ}) | _where(
    lambda s: s.family in (Family.GATHER, Family.ATOMIC))
ATOMICS = _where(lambda s: s.family is Family.ATOMIC)
TERNARY = _where(lambda s: s.family is Family.TERNARY)
SCANS = _where(lambda s: s.family is Family.SCAN)
ARG_REDUCTIONS = _where(lambda s: s.family is Family.ARG)
#: ops a trace of format version 1 cannot hold: using one makes the manifest version 2
VERSION_2 = frozenset(list(Op)[list(Op).index(Op.CONST):list(Op).index(Op.PHILOX) + 1])
#: ops that make a trace's manifest a minor version 1 of its major (guarded paths, ADR-0840)
GUARDED = frozenset({Op.GUARD})
#: ops that write no output operand (a scope's marks, a guard's decision)
NO_OUTPUT = SCOPE | GUARDED
#: ops that move data and write an output operand Phase 2 must produce
DATA_OPS = MEMORY | MATH | frozenset({Op.DOT, Op.SEND, Op.RECV})

#: every op by its name (``Op(name)`` without its exception on the per-op paths)
BY_NAME: dict[str, Op] = {op.value: op for op in Op}
KIND: dict[Op, Kind] = {op: s.kind for op, s in OPS.items()}
ENGINE: dict[Op, Engine] = {op: s.engine for op, s in OPS.items()}

#: engines that serve one op at a time (the invariant "no two ops overlap" applies)
CAPACITY_ONE = frozenset({Engine.DMA_RD, Engine.DMA_WR, Engine.GEMM, Engine.MATH, Engine.LINK_TX})
