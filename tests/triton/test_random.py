"""Triton's random numbers in the trace: concrete seeds and offsets are computed while
recording (no row, today's traces), a seed or offsets that are data make ``philox`` rows that
replay computes (the bits against Triton's interpreter: ``test_differential.py``, entries
``RANDOM``); one Philox evaluation's four words are priced once; what Triton's language
refuses is one line at the kernel's line."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import triton
import triton.language as tl
from triton.language.random import uint_to_uniform_float as imported_uniform

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import KernelError
from kernbench.record.lowering.philox import ROUND_OPS
from kernbench.trace.hw import load_hw
from tests.replay.oracle import philox_ref
from tests.triton.kernels import dropout, random_data

HERE = re.escape(f"{__name__.replace('.', '/')}.py")


def _names(trace: kb.Trace) -> list[str]:
    return trace.ops["name"].cast(str).to_list()


def test_a_loaded_seed_records_philox_rows_that_replay_computes(tmp_path) -> None:
    case = kb.build_case("dropout-seed-loaded", {}, factory=random_data.dropout_case)
    trace = kb.record(case, tmp_path / "d.ktrace")
    assert _names(trace).count("philox") == math.prod(case.grid) == 3  # one per program
    assert trace.manifest["schema_version"] == 3  # uint32 words
    res = kb.replay(trace.path, case=random_data.dropout_case, in_process=True)
    assert res.ok and res.verdict["outputs"]["out_ptr"]["checked"], res.verdict


def test_concrete_seeds_and_offsets_are_computed_while_recording(tmp_path) -> None:
    trace = kb.record(kb.build_case("r", {}, factory=dropout.random_case), tmp_path / "r.ktrace")
    assert "philox" not in _names(trace)
    res = kb.replay(trace.path, case=dropout.random_case, in_process=True)
    assert res.ok, res.verdict


def test_the_four_words_of_one_philox_evaluation_are_priced_once(tmp_path) -> None:
    """``randint4x``: the first word's row carries the rounds (8 lane operations per element
    and round), the other three one lane operation per element (ADR-0860)."""
    hw = load_hw("ahbm-v1")
    trace = kb.record(kb.build_case("c", {}, factory=random_data.counters_case),
                      tmp_path / "c.ktrace", hw=hw)
    rows = trace.ops.filter(trace.ops["name"].cast(str) == "philox")
    block, rounds = 32, 7
    assert [int(a.split('"word":')[1][0]) for a in rows["attrs"].to_list()] == [0, 1, 2, 3, 0]

    def cycles(elements: int) -> int:
        return (-(-elements // hw.math_lanes) * hw.math_op_cost + hw.math_overhead_cycles) * \
            round(1000 / hw.clock_ghz)

    assert rows["busy_ps"].to_list() == [cycles(block * ROUND_OPS * rounds),
                                         *[cycles(block)] * 3,
                                         cycles(block * ROUND_OPS * 10)]


@triton.jit
def wide_counters(out_ptr, seed_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a, b, c, d = tl.philox(tl.load(seed_ptr), offs.to(tl.int64), 0, 0, 0)
    tl.store(out_ptr + offs, a)


@triton.jit
def negative_rounds(out_ptr, seed_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.rand(tl.load(seed_ptr), offs, n_rounds=-1))


@triton.jit
def float_seed(out_ptr, x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.rand(tl.load(x_ptr), offs))


@pytest.mark.parametrize(("kernel", "seed", "match"), [
    (wide_counters, np.array([3], np.int32),
     r"tl\.philox counters must be 32-bit integers, got int64 \(Philox-4x64"),
    (negative_rounds, np.array([3], np.int32),
     r"tl\.rand n_rounds must be a non-negative constexpr integer, got -1"),
    (float_seed, np.array([3.0], np.float32), r"tl\.rand seed must be an integer, got "),
], ids=["philox-64-bit-counters", "negative-n-rounds", "float-seed"])
def test_what_triton_refuses_is_one_line_at_the_kernel_line(kernel, seed, match,
                                                              tmp_path) -> None:
    case = kbt.case(kernel, (1,), np.zeros(16, np.float32), seed, BLOCK=16)
    with pytest.raises(KernelError, match=rf"{HERE}:\d+: {match}") as info:
        kb.record(case, tmp_path / "x.ktrace")
    assert "\n" not in str(info.value)


@triton.jit
def imported_helper(out_ptr, seed_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bits = tl.randint(tl.load(seed_ptr), offs)
    tl.store(out_ptr + offs, imported_uniform(bits))  # triton.language.random's own name


def test_a_helper_imported_from_triton_language_random_is_kernbenchs(tmp_path) -> None:
    seed, n = 77, 16
    want = random_data.uniform(np.array([philox_ref(seed, (i, 0, 0, 0))[0] for i in range(n)],
                                        np.uint32))
    case = kbt.case(imported_helper, (1,), np.zeros(n, np.float32), np.array([seed], np.int32),
                    BLOCK=n, reference=lambda **_: {"out_ptr": want})
    trace = kb.record(case, tmp_path / "h.ktrace")
    res = kb.replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok and res.verdict["outputs"]["out_ptr"]["checked"], res.verdict
    assert "philox" in _names(trace)
