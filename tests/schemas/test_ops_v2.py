"""The version-2 op families record and replay to their numpy definitions: ternary (fma),
scans (cumsum, cumprod), arg-reductions (argmax, argmin); C semantics of // and %."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import DtypeError
from kernbench.record.lowering import semantics
from kernbench.replay import replay
from kernbench.schemas import ops
from kernbench.schemas.ops import OPS, Op

X = np.array([[3.0, -1.0, 3.0, 0.5], [-2.0, -2.0, 1.0, 7.0]], np.float32)
Z = np.array([[1.0, 2.0, -3.0, 4.0], [0.5, 0.25, 8.0, -1.0]], np.float32)


def _replayed(tmp_path, body, want, out_shape, out_dtype="float32"):
    @kb.kernel
    def k(x, z, y):
        a = tl.load(x, (2, 4), tl.float32)
        b = tl.load(z, (2, 4), tl.float32)
        tl.store(y, body(a, b))

    case = kb.Case(name="v2", kernel=k, grid=(1,),
                   tensors={"x": kb.tensor((2, 4), "float32", init=kb.data(X)),
                            "z": kb.tensor((2, 4), "float32", init=kb.data(Z)),
                            "y": kb.tensor(out_shape, out_dtype, role="output")},
                   reference=lambda x, z: {"y": want(x, z)})
    trace = kb.record(case, out=tmp_path / "t.ktrace")
    assert trace.manifest["schema_version"] == 2
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok and res.verdict["outputs"]["y"]["checked"], res.verdict
    return res


def test_fma_with_a_scalar_replays(tmp_path):
    _replayed(tmp_path, lambda a, b: semantics.ternary(Op.FMA, a, b, 0.5),
              lambda x, z: (x.astype(np.float64) * z + 0.5).astype(np.float32), (2, 4))


@pytest.mark.parametrize(("op", "axis", "reverse"), [(Op.CUMSUM, 1, False),
                                                      (Op.CUMSUM, 0, True),
                                                      (Op.CUMPROD, 1, False)])
def test_scans_replay(tmp_path, op, axis, reverse):
    ufunc = OPS[op].numpy

    def want(x, z):
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
        return ufunc.accumulate(x, axis=axis)

    _replayed(tmp_path, lambda a, b: semantics.scan(op, a, axis, reverse), want, (2, 4))


@pytest.mark.parametrize(("op", "axis", "want"), [(Op.ARGMAX, 1, [0, 3]),
                                                   (Op.ARGMIN, 1, [1, 0]),
                                                   (Op.ARGMAX, None, [7])])
def test_arg_reductions_take_the_first_index_on_ties(tmp_path, op, axis, want):
    shape = (2,) if axis is not None else (1,)
    _replayed(tmp_path, lambda a, b: semantics.arg_reduce(op, a, axis), lambda x, z: np.array(
        want, np.int32), shape, "int32")


def test_floordiv_and_mod_truncate_toward_zero_like_c():
    a = np.array([-7, 7, -7, 7, -6], np.int32)
    b = np.array([2, -2, -2, 2, 3], np.int32)
    assert OPS[Op.FLOORDIV].numpy(a, b).tolist() == [-3, -3, 3, 3, -2]
    assert OPS[Op.MOD].numpy(a, b).tolist() == [-1, 1, -1, 1, 0]
    assert OPS[Op.MOD].numpy(np.float32(-7.5), np.float32(2)) == -1.5


def test_bitwise_ops_on_floats_are_dtype_errors_at_the_kernel_line(tmp_path):
    @kb.kernel
    def k(x, y):
        a = tl.load(x, (4,), tl.float32)
        tl.store(y, semantics.binary(Op.AND, a, a))

    case = kb.Case(name="b", kernel=k, grid=(1,),
                   tensors={"x": kb.tensor((4,), "float32"),
                            "y": kb.tensor((4,), "float32", role="output")})
    with pytest.raises(DtypeError, match=r"test_ops_v2.py:\d+: and_ needs integer or bool "
                                         r"operands, got float32"):
        kb.record(case, out=tmp_path / "t.ktrace")


def test_every_version_2_op_is_listed_and_none_has_a_kernbench_tl_wrapper():
    assert Op.CONST in ops.VERSION_2 and Op.ARGMIN in ops.VERSION_2
    assert Op.DMA_READ not in ops.VERSION_2 and Op.GEMM not in ops.VERSION_2
    assert not any(OPS[op].tl for op in ops.VERSION_2)
