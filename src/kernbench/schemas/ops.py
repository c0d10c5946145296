"""The op vocabulary: every op name, its kind and engine, and the groups code asks about.

Other modules ask membership of these groups; they never compare op-name strings.
"""

from __future__ import annotations

from enum import StrEnum
from types import SimpleNamespace


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


class Op(StrEnum):
    # memory
    DMA_READ = "dma_read"
    DMA_WRITE = "dma_write"
    # gemm
    DOT = "dot"
    # math: binary
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
    # math: unary
    EXP = "exp"
    EXP2 = "exp2"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    ABS = "abs"
    NEG = "neg"
    CAST = "cast"
    # math: reductions
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    SOFTMAX = "softmax"
    # math: data movement and creation
    COPY = "copy"
    BROADCAST = "broadcast"
    FILL = "fill"
    ARANGE = "arange"
    # ipcq
    SEND = "send"
    RECV = "recv"
    # scope
    SCOPE_ENTER = "scope_enter"
    SCOPE_EXIT = "scope_exit"
    # composite parent
    GEMM = "gemm"


#: the same members as plain attributes: ``Op.X`` goes through an enum descriptor, which is
#: too slow for the per-op path of record and replay; ``OP.X is Op.X``.
OP = SimpleNamespace(**Op.__members__)

COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})
BINARY = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MAXIMUM, Op.MINIMUM}) | COMPARISONS
TRANSCENDENTAL = frozenset({Op.EXP, Op.EXP2, Op.LOG, Op.SQRT, Op.RSQRT, Op.DIV})
UNARY = frozenset({Op.EXP, Op.EXP2, Op.LOG, Op.SQRT, Op.RSQRT, Op.ABS, Op.NEG, Op.CAST})
REDUCTIONS = frozenset({Op.SUM, Op.MAX, Op.MIN})
CREATION = frozenset({Op.FILL, Op.ARANGE})
MEMORY = frozenset({Op.DMA_READ, Op.DMA_WRITE})
IPCQ = frozenset({Op.SEND, Op.RECV})
SCOPE = frozenset({Op.SCOPE_ENTER, Op.SCOPE_EXIT})
MATH = (
    BINARY | UNARY | REDUCTIONS | CREATION
    | frozenset({Op.WHERE, Op.SOFTMAX, Op.COPY, Op.BROADCAST})
)
#: ops whose kernel call returns before the op completes (the handle carries a pending time)
NON_BLOCKING = frozenset({Op.DMA_READ})
#: ops that move data and write an output operand Phase 2 must produce
DATA_OPS = MEMORY | MATH | frozenset({Op.DOT, Op.SEND, Op.RECV})

KIND: dict[Op, Kind] = {
    **{op: Kind.MEMORY for op in MEMORY},
    Op.DOT: Kind.GEMM,
    **{op: Kind.MATH for op in MATH},
    **{op: Kind.IPCQ for op in IPCQ},
    **{op: Kind.SCOPE for op in SCOPE},
    Op.GEMM: Kind.COMPOSITE,
}

ENGINE: dict[Op, Engine] = {
    Op.DMA_READ: Engine.DMA_RD,
    Op.DMA_WRITE: Engine.DMA_WR,
    Op.DOT: Engine.GEMM,
    **{op: Engine.MATH for op in MATH},
    Op.SEND: Engine.LINK_TX,
    Op.RECV: Engine.NONE,
    **{op: Engine.NONE for op in SCOPE},
    Op.GEMM: Engine.NONE,
}

#: engines that serve one op at a time (the invariant "no two ops overlap" applies)
CAPACITY_ONE = frozenset({Engine.DMA_RD, Engine.DMA_WR, Engine.GEMM, Engine.MATH, Engine.LINK_TX})
