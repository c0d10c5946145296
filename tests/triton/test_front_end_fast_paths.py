"""The front end's fast paths (the kernel's line looked up only when an op is recorded or an
error raised; memo keys carried by concrete values; masks, aranges and views from the
index-arithmetic memo; reductions worked out once per shape) change neither an error's
``file:line`` nor a recorded byte."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import KernelError
from kernbench.record.memo import BoundedMemo
from kernbench.triton import arith, mathops
from kernbench.triton.value import concrete

HERE = re.escape(f"{__name__.replace('.', '/')}.py")
_LINES = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> int:
    """The line of this file ending in ``# <marker>``."""
    return next(i for i, s in enumerate(_LINES, 1) if s.rstrip().endswith(f"# {marker}"))


@triton.jit
def pointer_times_two(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = x_ptr + offs
    tl.store(p * 2, 1.0)  # ptr-mul


@triton.jit
def _scaled(p, offs):  # a helper: its own line is the error's
    return p + offs * 1.5  # helper-float-offsets


@triton.jit
def float_offsets_in_helper(x_ptr, BLOCK: tl.constexpr):
    tl.store(_scaled(x_ptr, tl.arange(0, BLOCK)), 1.0)


@triton.jit
def concrete_division_by_zero(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    z = offs - offs
    tl.store(x_ptr + offs // z, 1.0)  # div-zero


@triton.jit
def unsigned_meets_negative(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.uint32)
    tl.store(x_ptr + tl.arange(0, BLOCK), (offs + -1).to(tl.float32))  # unsigned-negative


@triton.jit
def not_an_operand(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs + "a")  # string-operand


@triton.jit
def ragged_arange(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)  # ragged-arange


@triton.jit
def exp_of_integers(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.exp(offs))  # exp-int


@triton.jit
def too_many_indices(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs[:, :, None])  # too-many-indices


@triton.jit
def cast_a_pointer(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, x_ptr.to(tl.float32))  # cast-pointer


@triton.jit
def reduce_then_bool_axis(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    s = tl.sum(v, axis=0)  # a reduction along axis 0 is worked out (and kept) first
    tl.store(x_ptr, s + tl.sum(v, axis=True))  # bool-axis


@triton.jit
def reduce_out_of_range(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr, tl.max(v, axis=1))  # axis-range


@triton.jit
def small_dot(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK)[:, None] + tl.arange(0, BLOCK)[None, :])
    tl.store(x_ptr + tl.arange(0, BLOCK)[:, None], tl.dot(v, v))  # small-dot


@triton.jit
def trans_3d(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    w = tl.reshape(v, (2, 2, BLOCK // 4))
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.reshape(tl.trans(w, 2, 0, 1), (BLOCK,)))  # trans3


@pytest.mark.parametrize(("kernel", "block", "marker", "match"), [
    (pointer_times_two, 8, "ptr-mul", r"operator 'mul' on a pointer"),
    (float_offsets_in_helper, 8, "helper-float-offsets", r"pointer offsets must be integers"),
    (concrete_division_by_zero, 8, "div-zero", r"by zero in concrete index arithmetic"),
    (unsigned_meets_negative, 8, "unsigned-negative", r"scalar -1 is out of range for type uint32"),
    (not_an_operand, 8, "string-operand", r"operand 'a' \(str\) is neither"),
    (ragged_arange, 6, "ragged-arange", r"arange\(0, 6\) has length 6"),
    (exp_of_integers, 8, "exp-int", r"tl\.exp expects fp32 or fp64, got int32"),
    (too_many_indices, 8, "too-many-indices", r"too many indices for a \[8\] block"),
    (cast_a_pointer, 8, "cast-pointer", r"casting a pointer"),
    (reduce_then_bool_axis, 8, "bool-axis", r"reduction axis must be a tl\.constexpr integer"),
    (reduce_out_of_range, 8, "axis-range", r"axis"),
    (small_dot, 8, "small-dot", r"tl\.dot needs M, N, K >= 16"),
    (trans_3d, 8, "trans3", r"trans of loaded data supports 2-D blocks only"),
], ids=lambda v: v if isinstance(v, str) and " " not in v and "\\" not in v else None)
def test_an_error_names_the_exact_kernel_line(tmp_path, kernel, block, marker, match) -> None:
    c = kbt.case(kernel, (2,), np.zeros(64, np.float32), BLOCK=block, outputs=["x_ptr"])
    with pytest.raises(KernelError, match=rf"^{HERE}:{line_of(marker)}: .*{match}"):
        kb.record(c, out=tmp_path / "t.ktrace")


# -- the same bytes with the memo on and off ------------------------------------------------
M, N, BM, BN = 40, 24, 16, 16  # 3 x 2 programs, ragged in both dimensions


@triton.jit
def tile_kernel(x_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
    tot = tl.sum(x, axis=1)
    y = x * 2.0 + tot[:, None] - tl.max(x, axis=0)[None, :]
    tl.store(out_ptr + rows[:, None] * stride + cols[None, :], y, mask=mask)


def _tile_reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    out = np.zeros_like(x_ptr)
    for i in range(0, M, BM):
        for j in range(0, N, BN):
            t = x_ptr[i:i + BM, j:j + BN]
            full = np.zeros((BM, BN), np.float32)
            full[:t.shape[0], :t.shape[1]] = t
            y = full * 2.0 + full.sum(axis=1)[:, None] - full.max(axis=0)[None, :]
            out[i:i + BM, j:j + BN] = y[:t.shape[0], :t.shape[1]]
    return {"out_ptr": out}


def _tile_case() -> kb.Case:
    x = np.random.default_rng(3).standard_normal((M, N), dtype=np.float32)
    return kbt.case(tile_kernel, (-(-M // BM), -(-N // BN)), x, np.zeros_like(x), M, N, N,
                    BM=BM, BN=BN, outputs=["out_ptr"], reference=_tile_reference, name="tile")


def _digest(path: Path) -> dict[str, str]:
    return {f: hashlib.sha256((path / f).read_bytes()).hexdigest()
            for f in ("ops.parquet", "access.parquet", "tensors.parquet")}


def test_masks_views_and_reductions_record_the_same_bytes_memo_on_and_off(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(arith, "MEMO", False)
    kb.record(_tile_case(), tmp_path / "off.ktrace")
    monkeypatch.setattr(arith, "MEMO", True)
    monkeypatch.setattr(arith, "_MEMO", BoundedMemo())
    monkeypatch.setattr(mathops, "_REDUCTIONS", BoundedMemo())
    kb.record(_tile_case(), tmp_path / "cold.ktrace")
    kb.record(_tile_case(), tmp_path / "warm.ktrace")
    off = _digest(tmp_path / "off.ktrace")
    assert _digest(tmp_path / "cold.ktrace") == off
    assert _digest(tmp_path / "warm.ktrace") == off
    assert len(mathops._REDUCTIONS) == 2  # sum over axis 1, max over axis 0 of [16, 16]
    kinds = {k[0] for k in arith._MEMO if isinstance(k[0], str)}
    assert {"mask", "arange", "lt", "and_"} <= kinds
    res = kb.replay(tmp_path / "warm.ktrace", case=lambda **_: _tile_case(), in_process=True)
    assert res.verified, res.verdict


def test_a_view_keeps_its_source_key_and_values(monkeypatch) -> None:
    monkeypatch.setattr(arith, "_MEMO", BoundedMemo())
    v = np.arange(6, dtype=np.int32)
    x = concrete(v)
    col, row = x[:, None], x[None, :]
    assert col.memo_key is None  # no key until the source needs one
    s = arith.binary("add", x, 1)  # x gets its key: a result carries its own
    assert x.memo_key is not None and s.memo_key is not None
    col, row = s[:, None], s[None, :]
    assert col.memo_key == arith.array_key(s.dtype, col.value)
    assert row.memo_key == arith.array_key(s.dtype, row.value)
    got = arith.binary("mul", col, row)
    np.testing.assert_array_equal(got.value, (v + 1)[:, None] * (v + 1)[None, :])
    again = arith.binary("mul", s[:, None], s[None, :])  # from the memo
    assert again.value is got.value and again.memo_key == got.memo_key


@triton.jit
def dot_of_concrete(x_ptr, out_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + r[:, None] * BLOCK + r[None, :])
    ramp = (r[:, None] + r[None, :]).to(tl.float32)  # concrete, not uniform: a const op
    y = tl.dot(ramp, v)  # concrete-dot
    tl.store(out_ptr + r[:, None] * BLOCK + r[None, :], y)


def test_an_op_recorded_for_a_concrete_operand_names_the_kernel_line(tmp_path) -> None:
    import pyarrow.parquet as pq

    b = 16
    x = np.random.default_rng(5).standard_normal((b, b), dtype=np.float32)
    ramp = (np.arange(b)[:, None] + np.arange(b)[None, :]).astype(np.float32)
    c = kbt.case(dot_of_concrete, (1,), x, np.zeros_like(x), BLOCK=b, outputs=["out_ptr"],
                 reference=lambda x_ptr, **_: {"out_ptr": ramp @ x_ptr})
    kb.record(c, tmp_path / "t.ktrace")
    ops = pq.read_table(tmp_path / "t.ktrace" / "ops.parquet").to_pylist()
    line = f"{__name__.replace('.', '/')}.py:{line_of('concrete-dot')}"
    assert {o["name"] for o in ops if o["src"] == line} >= {"const", "dot"}
    res = kb.replay(tmp_path / "t.ktrace", case=lambda **_: c, in_process=True)
    assert res.verified, res.verdict


# -- the kernel's line by frame position ----------------------------------------------------
def _layer() -> object:
    """``src_here`` behind a tl layer (a function whose file is in the front end's folder)."""
    import os

    from kernbench.record.source import src_here
    from kernbench.triton import value

    ns: dict[str, object] = {"src_here": src_here}
    exec(compile("def layer():\n    return src_here()\n",  # noqa: S102 - a fixed test layer
                 os.path.join(os.path.dirname(value.__file__), "_layer.py"), "exec"), ns)
    return ns["layer"]


@pytest.mark.parametrize("limit", [1 << 14, 3])
def test_src_here_names_each_line_of_fresh_code_objects(monkeypatch, limit: int) -> None:
    """Kernels compiled again and again (code objects freed, their ids reused) on lines that
    move: every call names its own line, whatever the position cache holds."""
    from kernbench.record import source

    monkeypatch.setattr(source, "_AT", BoundedMemo())
    monkeypatch.setattr(source, "AT_LIMIT", limit)
    layer = _layer()
    for i in range(40):
        pad = "\n" * (i % 7)
        src = f"{pad}def kernel(layer):\n    a = layer()\n    b = layer()\n    return a, b\n"
        ns: dict[str, object] = {}
        exec(compile(src, "user_kernel.py", "exec"), ns)  # noqa: S102 - the test's own source
        got = ns["kernel"](layer)  # type: ignore[operator]
        first = 2 + i % 7
        assert got == (f"user_kernel.py:{first}", f"user_kernel.py:{first + 1}")
        del ns
    assert len(source._AT) <= limit
