"""The executor registry: every op has a handler, and each handler means what the docs say."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from kernbench.replay.convert import as_dtype
from kernbench.replay.executors import EXECUTORS, BindContext, ShapeMismatch
from kernbench.replay.store import MemoryStore, Operand
from kernbench.schemas import ops
from kernbench.schemas.ops import Op
from kernbench.trace.hw import HwConfig

BF16 = np.dtype(ml_dtypes.bfloat16)


class Tcm:
    """Arrays placed one after another in PE 0's TCM."""

    def __init__(self) -> None:
        self.store = MemoryStore(HwConfig().to_dict(), [])
        self.cursor = 0

    def put(self, arr: Any, transposed: bool = False) -> Operand:
        arr = np.ascontiguousarray(arr)
        stored = np.ascontiguousarray(arr.T) if transposed else arr
        self.store.fill("tcm", 0, self.cursor, stored.tobytes())
        o = self.store.operand("tcm", 0, self.cursor, arr.shape, arr.dtype.name, transposed)
        self.cursor += -(-stored.nbytes // 16) * 16
        return o

    def slot(self, shape: tuple[int, ...], dtype: str = "float32") -> Operand:
        o = self.store.operand("tcm", 0, self.cursor, shape, dtype, False)
        self.cursor += -(-o.nbytes // 16) * 16
        return o

    def run(self, op: Op, ins: list[Operand], out: Operand | None, **attrs: Any) -> Any:
        step = EXECUTORS[op].bind(attrs, ins, out, BindContext(self.store, 0))
        res = step()
        if res is None or out is None:
            return None
        # the engine's write (bfloat16 is stored as uint16 bits), then the value as ml_dtypes
        # has it: the comparisons below are against ml_dtypes
        got = as_dtype(np.asarray(res), out.npd)
        return got.view(BF16) if out.dtype == "bfloat16" else got


@pytest.mark.parametrize("op", sorted(ops.DATA_OPS), ids=str)
def test_every_data_op_has_an_executor(op: Op) -> None:
    assert callable(EXECUTORS[op].bind)


def test_the_registry_covers_the_whole_op_vocabulary() -> None:
    assert set(EXECUTORS) == set(Op)


X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
Y = np.array([[2.0, 2.0, 2.0], [-1.0, 0.25, 3.0]], np.float32)


@pytest.mark.parametrize(("op", "fn"), [
    (Op.ADD, np.add), (Op.SUB, np.subtract), (Op.MUL, np.multiply),
    (Op.DIV, np.true_divide), (Op.MAXIMUM, np.maximum), (Op.MINIMUM, np.minimum),
    (Op.LT, np.less), (Op.GE, np.greater_equal), (Op.EQ, np.equal),
], ids=str)
def test_binary_ops_are_their_numpy_ufuncs(op: Op, fn: Any) -> None:
    m = Tcm()
    dtype = "bool" if op in ops.COMPARISONS else "float32"
    got = m.run(op, [m.put(X), m.put(Y)], m.slot((2, 3), dtype))
    np.testing.assert_array_equal(got, fn(X, Y))


def test_a_scalar_goes_at_its_recorded_position() -> None:
    m = Tcm()
    x = m.put(X)
    np.testing.assert_array_equal(m.run(Op.SUB, [x], m.slot((2, 3)), scalars=[[0, 1.0]]),
                                  1.0 - X)
    np.testing.assert_array_equal(m.run(Op.SUB, [x], m.slot((2, 3)), scalars=[[1, 1.0]]),
                                  X - 1.0)


def test_elementwise_ops_broadcast_a_column() -> None:
    m = Tcm()
    col = np.array([[2.0], [3.0]], np.float32)
    got = m.run(Op.MUL, [m.put(X), m.put(col)], m.slot((2, 3)))
    np.testing.assert_array_equal(got, X * col)


def test_bfloat16_is_computed_in_float32_and_rounded_once() -> None:
    m = Tcm()
    a, b = X.astype(BF16), Y.astype(BF16)
    got = m.run(Op.DIV, [m.put(a), m.put(b)], m.slot((2, 3), "bfloat16"))
    want = (a.astype(np.float32) / b.astype(np.float32)).astype(BF16)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_where_takes_scalars_at_positions_one_and_two() -> None:
    m = Tcm()
    cond = m.put(X > 0)
    got = m.run(Op.WHERE, [cond, m.put(X)], m.slot((2, 3)), scalars=[[2, -5.0]])
    np.testing.assert_array_equal(got, np.where(X > 0, X, -5.0))


@pytest.mark.parametrize(("op", "fn"), [
    (Op.EXP, np.exp), (Op.EXP2, np.exp2), (Op.LOG, np.log), (Op.SQRT, np.sqrt),
    (Op.ABS, np.abs), (Op.NEG, np.negative),
    (Op.RSQRT, lambda v: np.float32(1) / np.sqrt(v)),
], ids=lambda v: str(v) if isinstance(v, Op) else "")
def test_unary_ops(op: Op, fn: Any) -> None:
    m = Tcm()
    v = np.abs(X) + np.float32(0.5)
    np.testing.assert_allclose(m.run(op, [m.put(v)], m.slot((2, 3))), fn(v), rtol=1e-6)


def test_cast_converts_to_the_output_dtype() -> None:
    m = Tcm()
    got = m.run(Op.CAST, [m.put(X)], m.slot((2, 3), "int32"), dtype="int32")
    np.testing.assert_array_equal(got, X.astype(np.int32))


@pytest.mark.parametrize(("op", "axis", "keepdims", "shape"), [
    (Op.SUM, 1, True, (2, 1)), (Op.MAX, 0, False, (3,)), (Op.MIN, None, False, (1,)),
    (Op.SUM, None, True, (1, 1)),
], ids=str)
def test_reductions_are_reshaped_to_the_output(op: Op, axis: int | None, keepdims: bool,
                                                shape: tuple[int, ...]) -> None:
    m = Tcm()
    fn = {Op.SUM: np.sum, Op.MAX: np.max, Op.MIN: np.min}[op]
    got = m.run(op, [m.put(X)], m.slot(shape), axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got, np.reshape(fn(X, axis=axis, keepdims=keepdims), shape))


def test_softmax_is_numerically_stable() -> None:
    m = Tcm()
    big = X * np.float32(100.0)
    got = m.run(Op.SOFTMAX, [m.put(big)], m.slot((2, 3)), axis=-1)
    e = np.exp(big - big.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=-1, keepdims=True), rtol=1e-6)
    assert np.isfinite(got).all()


def test_dot_reads_a_transposed_operand_and_accumulates_in_float32() -> None:
    m = Tcm()
    a = X.astype(BF16)
    bt = Y.astype(BF16)  # stored [N, K]; the operand is its transpose [K, N]
    acc = np.ones((2, 2), np.float32)
    got = m.run(Op.DOT, [m.put(a), m.put(bt.T, transposed=True), m.put(acc)], m.slot((2, 2)))
    want = a.astype(np.float32) @ bt.astype(np.float32).T + acc
    np.testing.assert_array_equal(got, want)


def test_broadcast_copies_to_the_new_shape() -> None:
    m = Tcm()
    col = np.array([[1.0], [2.0]], np.float32)
    got = m.run(Op.BROADCAST, [m.put(col)], m.slot((2, 4)), shape=[2, 4])
    np.testing.assert_array_equal(got, np.broadcast_to(col, (2, 4)))


def test_fill_and_arange_make_constants() -> None:
    m = Tcm()
    np.testing.assert_array_equal(m.run(Op.FILL, [], m.slot((2, 2), "bfloat16"), value=1.5),
                                  np.full((2, 2), 1.5, BF16))
    np.testing.assert_array_equal(m.run(Op.ARANGE, [], m.slot((4,), "int32"), start=3),
                                  np.arange(3, 7, dtype=np.int32))


@pytest.mark.parametrize("op", [Op.DMA_READ, Op.COPY, Op.SEND, Op.RECV], ids=str)
def test_copy_like_ops_copy_their_input_into_their_output(op: Op) -> None:
    m = Tcm()
    np.testing.assert_array_equal(m.run(op, [m.put(X)], m.slot((2, 3))), X)


def test_dma_write_converts_to_the_tensor_dtype() -> None:
    m = Tcm()
    got = m.run(Op.DMA_WRITE, [m.put(X)], m.slot((2, 3), "bfloat16"))
    np.testing.assert_array_equal(got, X.astype(BF16))


def test_scope_exit_invalidates_the_rewound_tcm() -> None:
    m = Tcm()
    m.put(np.zeros(16, np.float32))
    m.run(Op.SCOPE_EXIT, [], None, lo=16, hi=48)
    valid = m.store.memory("tcm", 0).valid
    assert valid[:16] == b"\x01" * 16 and valid[16:48] == bytes(32) and valid[48:64] == b"\x01" * 16


@pytest.mark.parametrize(("op", "shapes", "out", "attrs", "message"), [
    (Op.ADD, [(2, 3), (2, 4)], (2, 3), {}, r"do not broadcast"),
    (Op.ADD, [(2, 3), (2, 3)], (3, 2), {}, r"broadcast to \[2, 3\], output is \[3, 2\]"),
    (Op.DOT, [(2, 3), (2, 3)], (2, 3), {}, r"dot \[2, 3\] @ \[2, 3\]"),
    (Op.DMA_READ, [(2, 3)], (2, 4), {}, r"reads 24 bytes .* output holds 32 bytes"),
    (Op.SUM, [(2, 3)], (3,), {"axis": 1, "keepdims": False}, r"sum\(axis=1\)"),
    (Op.EXP, [(2, 3), (2, 3)], (2, 3), {}, r"exp takes 1 inputs, got 2"),
    (Op.MUL, [(2, 3)], (2, 3), {}, r"needs 2 arguments, has 1 inputs and 0 scalars"),
], ids=lambda v: str(v)[:20])
def test_operands_that_do_not_fit_are_a_shape_mismatch(op: Op, shapes: list, out: tuple,
                                                        attrs: dict, message: str) -> None:
    m = Tcm()
    ins = [m.put(np.zeros(s, np.float32)) for s in shapes]
    with pytest.raises(ShapeMismatch, match="Shape mismatch: .*" + message):
        EXECUTORS[op].bind(attrs, ins, m.slot(out), BindContext(m.store, 0))
