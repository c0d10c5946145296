"""Decisions on data in Triton kernels (ADR-0840): the guard rows hold what numpy says the
conditions are, a decided scalar is index arithmetic from then on (static masks, plain
DMAs), block pointers take bounds read from memory, and a spin lock spins as long as the
recorded order says (tests/triton/kernels/guards.py holds the kernels)."""

from __future__ import annotations

import json

import numpy as np
import triton
import triton.language as tl

import kernbench as kb
from tests.triton.kernels import guards as g
from tests.triton.kernels.spec import Launch


def guard_bits(trace: kb.Trace) -> dict[int, list[int]]:
    """Each program's guard values, in its order."""
    rows = trace.ops.filter(trace.ops["name"].cast(str) == "guard").sort("op_id").to_dicts()
    out: dict[int, list[int]] = {}
    for r in rows:
        out.setdefault(r["program"], []).append(json.loads(r["attrs"])["bits"])
    return out


def test_cross_entropy_decides_on_each_label_as_numpy_compares_it(tmp_path):
    launch = g.cross_entropy_launch()
    trace = kb.record(launch.case(), tmp_path / "ce.ktrace")
    labels = launch.arrays()["Y_ptr"]
    bits = guard_bits(trace)
    for row, y in enumerate(labels):
        first = bits[row][0]  # y == ignore_index
        assert first == int(y == -100)
        if y != -100:  # then the label is the offset of X_ptr + y: decided, its int64 bits
            assert bits[row][1] == int(y)
    assert kb.replay(trace.path, case=g.cross_entropy_case, in_process=True).ok


def test_varlen_lengths_pin_the_masks_no_gather_is_left(tmp_path):
    launch = g.varlen_launch()
    trace = kb.record(launch.case(), tmp_path / "v.ktrace")
    names = set(trace.ops["name"].cast(str).to_list())
    assert "gather" not in names and "const" not in names  # masks and offsets are concrete
    lens = launch.arrays()["lens_ptr"]
    bits = guard_bits(trace)
    for b, n in enumerate(lens):
        assert bits[b][0] == int(n == 0)  # the early return
        if n:
            assert int(n) in bits[b]  # the loop bound
    assert kb.replay(trace.path, case=g.varlen_case, in_process=True).ok


@triton.jit
def block_ptr_rows(x_ptr, starts_ptr, lens_ptr, out_ptr, BLOCK: tl.constexpr):
    """A varlen sum through a block pointer whose shape and offset are read from memory."""
    b = tl.program_id(0)
    start = tl.load(starts_ptr + b)
    n = tl.load(lens_ptr + b)
    p = tl.make_block_ptr(x_ptr, shape=(start + n,), strides=(1,), offsets=(start,),
                          block_shape=(BLOCK,), order=(0,))
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(0, n, BLOCK):
        acc += tl.load(p, boundary_check=(0,), padding_option="zero")
        p = tl.advance(p, (BLOCK,))
    tl.store(out_ptr + b, tl.sum(acc, axis=0))


def block_ptr_case() -> kb.Case:
    lens = np.array([9, 3, 20], np.int32)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int32)
    x = np.arange(int(lens.sum()) + 5, dtype=np.float32)

    def reference(x_ptr: np.ndarray, starts_ptr: np.ndarray, lens_ptr: np.ndarray,
                  **_: np.ndarray) -> dict[str, np.ndarray]:
        return {"out_ptr": np.array([x_ptr[s:s + k].sum() for s, k in
                                     zip(starts_ptr, lens_ptr, strict=True)], np.float32)}

    return Launch("block-ptr-rows", block_ptr_rows, (3,),
                  (x, starts, lens, np.zeros(3, np.float32)), {"BLOCK": 8}, reference,
                  outputs=("out_ptr",)).case()


def test_block_pointer_bounds_read_from_memory_are_decided(tmp_path):
    trace = kb.record(block_ptr_case(), tmp_path / "b.ktrace")
    # per program: the shape start + n, the offset start, then the loop bound n
    assert guard_bits(trace) == {0: [9, 0, 9], 1: [12, 9, 3], 2: [32, 12, 20]}
    assert kb.replay(trace.path, case=block_ptr_case, in_process=True).ok


def test_a_spin_lock_spins_only_while_another_program_holds_it(tmp_path):
    programs = 12
    trace = kb.record(g.locked_case(programs), tmp_path / "l.ktrace", hw="ahbm-v2")
    bits = guard_bits(trace)
    # each program's last try finds the lock free (0), every earlier one held (1)
    assert sorted(bits) == list(range(programs))
    assert all(b[-1] == 0 and all(x == 1 for x in b[:-1]) for b in bits.values())
    assert sum(len(b) - 1 for b in bits.values()) > 0  # programs on other PEs did wait
    res = kb.replay(trace.path, case=lambda: g.locked_case(programs), in_process=True)
    assert res.ok, res.verdict
    assert kb.analyze.check(trace).exit_code == 0  # the lock orders the critical sections
