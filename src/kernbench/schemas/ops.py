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

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from types import SimpleNamespace

import numpy as np


class Kind(StrEnum):
    MEMORY = "memory"
    GEMM = "gemm"
    MATH = "math"
    IPCQ = "ipcq"
    SCOPE = "scope"
    COMPOSITE = "composite"


class Engine(StrEnum):
    DMA_RD = "dma_rd"
    DMA_WR = "dma_wr"
    GEMM = "gemm"
    MATH = "math"
    LINK_TX = "link_tx"
    NONE = "none"


class Cost(StrEnum):
    """Which closed-form timing model prices the op (record/timing.py, docs/hardware-model)."""

    FREE = "free"
    DMA_READ = "dma_read"
    DMA_WRITE = "dma_write"
    GEMM = "gemm"
    MATH = "math"  # ceil(elements / lanes) * op_cost + overhead
    TRANSCENDENTAL = "transcendental"  # ... * transcendental_cost + overhead
    SOFTMAX = "softmax"  # ... * math_softmax_cost + overhead
    LINK = "link"


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


class Dt(StrEnum):
    """Output dtype from the operand dtype (after promotion of the elementwise operands)."""

    SAME = "same"
    FLOAT = "float"  # integer operands compute in float32
    BOOL = "bool"
    INT32 = "int32"
    FLOAT32 = "float32"
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


def rsqrt(x: np.ndarray) -> np.ndarray:
    r = np.sqrt(x)
    return np.reciprocal(r, out=r) if r.dtype.kind == "f" else 1.0 / r


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` as ``exp(-log(1 + exp(-x)))``: no overflow, accurate tails."""
    return np.exp(-np.logaddexp(0, -x))


_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """libm's erf in float64, elementwise (numpy has none); exact before the float32 store."""
    return _ERF(np.asarray(x, dtype=np.float64)).astype(np.float64)  # type: ignore[union-attr]


def _spec(op: Op, family: Family, dtype: Dt, arity: int, doc: str, numpy=None, *,
          cost: Cost = Cost.MATH, tl: bool = False, kind: Kind = Kind.MATH,
          engine: Engine = Engine.MATH) -> OpSpec:
    if family in _NUMPY_DEFINED and not callable(numpy):
        raise TypeError(f"op {op.value!r} of family {family.value} needs its numpy function")
    return OpSpec(op, kind, engine, cost, family, dtype, arity, doc, numpy, tl)


#: families whose Phase 2 semantics is the entry's numpy function (required in the table)
_NUMPY_DEFINED = frozenset({Family.UNARY, Family.BINARY, Family.WHERE, Family.REDUCE})


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
NON_BLOCKING = frozenset({Op.DMA_READ})
#: ops that move data and write an output operand Phase 2 must produce
DATA_OPS = MEMORY | MATH | frozenset({Op.DOT, Op.SEND, Op.RECV})

KIND: dict[Op, Kind] = {op: s.kind for op, s in OPS.items()}
ENGINE: dict[Op, Engine] = {op: s.engine for op, s in OPS.items()}

#: engines that serve one op at a time (the invariant "no two ops overlap" applies)
CAPACITY_ONE = frozenset({Engine.DMA_RD, Engine.DMA_WR, Engine.GEMM, Engine.MATH, Engine.LINK_TX})


def markdown() -> str:
    """The op table as a Markdown table (``python -m kernbench.schemas.ops``)."""
    rows = ["| name | kind | engine | cost | family | dtype | arity | tl | meaning |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s in OPS.values():
        rows.append(f"| `{s.op}` | {s.kind} | {s.engine} | {s.cost} | {s.family} | {s.dtype} "
                    f"| {s.arity if s.arity >= 0 else 'n'} | {'yes' if s.tl else ''} "
                    f"| {s.doc} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover - prints the generated doc table
    print(markdown())
