"""64-bit and small integers end to end (issue 29): the library-style kernels of
``kernels/integers.py`` record, replay verified and match numpy; offsets beyond int32 are
refused, never wrapped; a trace that holds a new integer dtype or a bitcast is schema
version 3, and a lower version over such rows is a finding; what the trace format cannot
hold is refused at the kernel's line with the reason.

Two of the kernels (the cross-entropy and the wide-integer semantics) are in
``conftest.ALL``: replayed in the replay child, on ahbm-v2, without Triton and against
Triton's interpreter. The others replay here in process (a replay child costs a second of
CPU each); their references were held against the interpreter when they were written, and
share its rules with the ``ALL`` kernels."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import BoundsError, DtypeError
from kernbench.testing import assert_check_ok
from tests.triton.kernels import integers

HERE = re.escape(f"{__name__.replace('.', '/')}.py")


@pytest.mark.parametrize("name", ["embedding", "moe_rows", "moe_histogram", "moe_align",
                                  "topk_keys"],
                         ids=["embedding-int64-ids", "moe-rows-to-int64-pointer-arithmetic",
                              "moe-histogram-int64-and-uint32-atomics",
                              "moe-align-prefix-sum-and-int64-scatter",
                              "topk-sort-uint32-keys-from-bitcast-floats"])
def test_integer_kernel_records_replays_verified_and_matches_numpy(tmp_path, name):
    factory = getattr(integers, f"{name}_case")
    trace = kb.record(factory(), out=tmp_path / f"{name}.ktrace")
    assert trace.manifest["schema_version"] == 3
    assert_check_ok(trace)
    res = kb.replay(trace.path, case=factory, in_process=True)
    assert res.verified, res.verdict
    want = getattr(integers, f"{name}_launch")().expected()
    assert set(res.outputs) == set(want)
    for out, expected in want.items():
        got = res.outputs[out]
        assert got.dtype == expected.dtype, out
        if got.dtype.kind in "iu":
            np.testing.assert_array_equal(got, expected, err_msg=out)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=out)


@pytest.mark.parametrize(("far", "dtype"), [(2**32 + 3, "int64"), (2**32 - 61, "uint32"),
                                            (-(2**32) + 3, "int64")],
                         ids=["int64-above-2**32", "uint32-above-2**31", "int64-below--2**32"])
def test_a_loaded_offset_beyond_int32_is_refused_by_replay_not_wrapped(tmp_path, far, dtype):
    """Wrapped to int32 (and indexed as numpy indexes), each offset reads element 3 of the
    64-element ``x``, and the reference (which wraps) would pass; replay reads the offset in
    64 bits and refuses it, naming it."""
    def factory():
        return integers.far_gather_case(far=far, dtype=dtype)

    trace = kb.record(factory(), out=tmp_path / "far.ktrace")
    res = kb.replay(trace.path, case=factory, in_process=True)
    assert res.status == "failed"
    bad = res.verdict["invalid_read"]
    assert bad["name"] == "gather" and bad["src"].startswith("tests/triton/kernels/integers.py:")
    assert f"gather offset {far} at tile index [3] is outside the tensor [0, 64)" in \
        bad["message"]


def test_the_same_gather_within_the_tensor_verifies(tmp_path):
    trace = kb.record(integers.far_gather_case(far=63), out=tmp_path / "near.ktrace")
    assert kb.replay(trace.path, case=integers.far_gather_case, in_process=True).verified


@triton.jit
def far_block(x_ptr, y_ptr, step, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + pid * step + offs))


def test_a_concrete_int64_offset_beyond_int32_is_a_bounds_error_at_record(tmp_path):
    """``pid.to(tl.int64) * step`` with step = 2**32: program 1's pointers are 2**32 elements
    on, which int32 arithmetic would have wrapped back onto program 0's block."""
    case = kbt.case(far_block, (2,), np.zeros(64, np.float32), np.zeros(8, np.float32), 2**32,
                    BLOCK=8, outputs=["y_ptr"])
    with pytest.raises(BoundsError, match=rf"^{HERE}:\d+: .*offset 4294967296 at tile index "
                                          r"\[0\] is outside tensor 'x_ptr'"):
        kb.record(case, out=tmp_path / "step.ktrace")


def test_traces_holding_the_new_dtypes_are_version_3_and_a_lower_version_is_a_finding(
        tmp_path):
    trace = kb.record(integers.embedding_case(), out=tmp_path / "emb.ktrace")
    assert trace.manifest["schema_version"] == 3
    assert kb.Trace.open(trace.path).validation.ok
    manifest = json.loads((trace.path / "manifest.json").read_text())
    manifest["schema_version"] = 2
    (trace.path / "manifest.json").write_text(json.dumps(manifest))
    found = kb.Trace.open(trace.path, strict=False).validation.rule("schema")
    assert found.height > 0
    assert found["message"].str.contains(
        r"dma_read\) holds an int64/uint32/uint8/int16 operand or a bitcast, a version-3 row "
        "in a trace whose manifest says schema_version 2").any()


def test_a_trace_of_int32_ids_is_written_as_before(tmp_path):
    from tests.triton.kernels import embedding

    trace = kb.record(embedding.case(), out=tmp_path / "emb32.ktrace")
    assert trace.manifest["schema_version"] == 2  # indexed memory, no version-3 dtype


@triton.jit
def bitcast_bf16(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.int16, bitcast=True))


@triton.jit
def to_uint16(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.load(x_ptr + offs).to(tl.uint16) + 1).to(tl.int32))


@triton.jit
def bitcast_width(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.int32, bitcast=True))


@pytest.mark.parametrize(("kernel", "x", "y", "error", "match"), [
    (bitcast_bf16, "bfloat16", np.int16, DtypeError,
     r"bitcast of bfloat16 to int16 is not supported by kernbench"),
    (to_uint16, np.int32, np.int32, DtypeError,
     r"tl\.uint16 is not supported by kernbench's trace format \(bfloat16 is held as uint16"),
    (bitcast_width, np.int64, np.int32, kb.KernelError,
     r"bitcast from int64 to int32 changes the bit width"),
], ids=["bitcast-bf16", "uint16-data", "bitcast-width"])
def test_integer_data_the_format_cannot_hold_is_refused_at_the_kernel_line(
        tmp_path, kernel, x, y, error, match):
    if x == "bfloat16":
        import ml_dtypes

        x = ml_dtypes.bfloat16
    case = kbt.case(kernel, (1,), np.zeros(8, x), np.zeros(8, y), BLOCK=8, outputs=["y_ptr"])
    with pytest.raises(error, match=rf"^{HERE}:\d+: .*{match}"):
        kb.record(case, out=tmp_path / "r.ktrace")


@triton.jit
def invert(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, ~tl.load(x_ptr + offs))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint8, np.int64])
def test_bitwise_not_of_loaded_integers_flips_every_bit(tmp_path, dtype):
    """``~x`` of unsigned data is an xor with the all-ones value of the type (a ``-1`` scalar
    is out of range for it; Triton 3.8's interpreter fails on exactly that)."""
    x = np.random.default_rng(0).integers(0, np.iinfo(dtype).max, 8, dtype=dtype)

    def factory():
        return kbt.case(invert, (1,), x, np.zeros(8, dtype), BLOCK=8, outputs=["y_ptr"],
                        reference=lambda x_ptr, **_: {"y_ptr": np.invert(x_ptr)})

    trace = kb.record(factory(), out=tmp_path / "inv.ktrace")
    res = kb.replay(trace.path, case=factory, in_process=True)
    assert res.verified, res.verdict
    np.testing.assert_array_equal(res.outputs["y_ptr"], np.invert(x))
