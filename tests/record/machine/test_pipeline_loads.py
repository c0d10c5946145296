"""Software pipelining of loop loads (``record/machine/pipeline.py``): Triton's ``num_stages``."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.analyze import check
from kernbench.record.lowering.lifetime import lifetime_scope
from kernbench.record.machine.pipeline import DEFAULT_NUM_STAGES, pipelined
from kernbench.replay import replay
from tests.conftest import rows
from tests.record.lowering.test_lifetime import Value

M = N = 128
BK = 128
#: a GEMM-bound machine: one iteration's loads (2 x 32 KiB) take 84 ns, its GEMM 160 ns
FAST_HBM = kb.HwConfig(name="fast-hbm", hbm_gbps=1024, dma_latency_ns=20)


@kb.kernel
def matmul_k_loop(a, b, c, *, k_tiles: int, stages: int):
    """c = sum_k a[k] @ b[k] over pre-tiled operands, as a Triton K loop would run
    (``stages`` 0: the launch gave no num_stages)."""
    with lifetime_scope():
        acc = Value(tl.zeros((M, N), tl.float32))
        for k in pipelined(range(k_tiles), stages or None, src="matmul_k_loop"):
            x = Value(tl.load(a + k * M * BK, (M, BK), tl.bfloat16))
            y = Value(tl.load(b + k * BK * N, (BK, N), tl.bfloat16))
            acc = Value(tl.dot(x.h, y.h, acc.h))
        tl.store(c, acc.h)


def _reference(a: np.ndarray, b: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    a3 = a.astype(np.float32).reshape(-1, M, BK)
    b3 = b.astype(np.float32).reshape(-1, BK, N)
    return {"c": np.einsum("kmj,kjn->mn", a3, b3).reshape(-1)}


def matmul_case(k_tiles: int, stages: int | None) -> kb.Case:
    return kb.Case("matmul_k_loop", matmul_k_loop, (1,), {
        "a": kb.tensor((k_tiles * M * BK,), "bfloat16", init=kb.randn(seed=1)),
        "b": kb.tensor((k_tiles * BK * N,), "bfloat16", init=kb.randn(seed=2)),
        "c": kb.tensor((M * N,), "float32", role="output"),
    }, {"k_tiles": k_tiles, "stages": stages or 0}, reference=_reference)


def _loop_ps(trace: kb.Trace) -> int:
    """From the loop's first load to its last GEMM's end."""
    return rows(trace, "dot")[-1]["t_end_ps"] - rows(trace, "dma_read")[0]["t_issue_ps"]


def test_three_stages_beat_one_by_dma_plus_gemm_over_the_larger(tmp_path):
    """The issue's timing test: speed-up ~ (dma + gemm) / max(dma, gemm), within 10%."""
    k = 32
    serial = kb.record(matmul_case(k, 1), tmp_path / "s1.ktrace", hw=FAST_HBM)
    piped = kb.record(matmul_case(k, 3), tmp_path / "s3.ktrace", hw=FAST_HBM)
    loads = rows(serial, "dma_read")[:2]
    dma = loads[1]["t_end_ps"] - loads[0]["t_issue_ps"]  # one iteration's loads, serially
    gemm = rows(serial, "dot")[0]["busy_ps"]
    assert dma == 84_000 and gemm == 160_000
    predicted = (dma + gemm) / max(dma, gemm)
    measured = _loop_ps(serial) / _loop_ps(piped)
    assert measured == pytest.approx(predicted, rel=0.10)
    assert measured > 1.4


def test_one_stage_issues_every_load_at_its_use(tmp_path):
    trace = kb.record(matmul_case(6, 1), tmp_path / "s1.ktrace", hw=FAST_HBM)
    dots = rows(trace, "dot")
    loads = rows(trace, "dma_read")
    for i, dot in enumerate(dots[:-1]):  # iteration i+1's loads wait for iteration i's GEMM
        assert loads[2 * (i + 1)]["t_issue_ps"] == dot["t_end_ps"]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_loads_run_at_most_stages_minus_one_iterations_ahead(tmp_path, stages):
    """When iteration i's GEMM starts, no load of iteration i + stages has been issued,
    and a load lands in the bytes of iteration i - stages only after that one's GEMM."""
    k = 10
    trace = kb.record(matmul_case(k, stages), tmp_path / "s.ktrace", hw=FAST_HBM)
    dots = rows(trace, "dot")
    loads = rows(trace, "dma_read")
    for i, dot in enumerate(dots):
        if i + stages < k:
            assert loads[2 * (i + stages)]["t_issue_ps"] >= dot["t_start_ps"]
    for i in range(stages, k):
        for j in (0, 1):
            ld, old = loads[2 * i + j], loads[2 * (i - stages) + j]
            assert ld["output"]["addr"] == old["output"]["addr"]  # the site's ring of s
            assert ld["t_issue_ps"] >= dots[i - stages]["t_end_ps"]


def test_pipelined_trace_passes_every_invariant_and_replays_exactly(tmp_path):
    case = matmul_case(8, 3)
    trace = kb.record(case, tmp_path / "mm.ktrace", hw=FAST_HBM)
    report = check(trace)
    assert [(r.name, r.count) for r in report.invariants if r.count] == []
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict


def test_dma_bound_loop_follows_the_closed_form(tmp_path):
    """On ahbm-v1 a 128-wide K loop is DMA-bound (the 500 ns latency alone exceeds the
    GEMM); latency pipelines, so the steady-state period is
    max(gemm, channel busy, (busy + latency + gemm) / stages)."""
    k = 24
    for stages in (1, 2, 3):
        trace = kb.record(matmul_case(k, stages), tmp_path / f"v1-{stages}.ktrace")
        dots = rows(trace, "dot")
        loads = rows(trace, "dma_read")[:2]
        busy = loads[0]["busy_ps"] + loads[1]["busy_ps"]
        latency = loads[1]["t_end_ps"] - loads[1]["t_start_ps"] - loads[1]["busy_ps"]
        gemm = dots[0]["busy_ps"]
        period = (dots[-1]["t_start_ps"] - dots[-13]["t_start_ps"]) / 12  # steady state
        assert period == pytest.approx(max(gemm, busy, (busy + latency + gemm) / stages),
                                       rel=0.01)


def test_scratch_peak_is_independent_of_k_and_counts_each_stage(tmp_path):
    peaks = {(k, s): kb.record(matmul_case(k, s), tmp_path / f"{k}-{s}.ktrace",
                               hw=FAST_HBM).manifest["scratch_peak_bytes"]
             for k in (4, 40) for s in (1, 3)}
    assert peaks[(4, 1)] == peaks[(40, 1)]
    assert peaks[(4, 3)] == peaks[(40, 3)]
    tile = M * BK * 2
    # two accumulators, and per load site 3 ring buffers instead of 2 values live
    assert peaks[(40, 3)] == 2 * M * N * 4 + 2 * 3 * tile
    assert peaks[(40, 1)] < peaks[(40, 3)]


def test_the_default_is_three_stages(tmp_path):
    assert DEFAULT_NUM_STAGES == 3
    default = kb.record(matmul_case(6, None), tmp_path / "d.ktrace", hw=FAST_HBM)
    three = kb.record(matmul_case(6, 3), tmp_path / "3.ktrace", hw=FAST_HBM)
    assert default.ops["t_issue_ps"].to_list() == three.ops["t_issue_ps"].to_list()


@kb.kernel
def bad_stages(x):
    for _ in pipelined(range(2), 0, src="k.py:7"):
        pass


def test_num_stages_below_one_is_a_kernel_error(rec):
    with pytest.raises(kb.KernelError, match=r"num_stages must be an int >= 1, got 0"):
        rec(bad_stages, {"x": kb.tensor((4,), "float32")})


@kb.kernel
def chain(x, *, n: int, stages: int):
    """x[i + 1] = x[i] + 1 through HBM: each load reads what the last iteration stored."""
    with lifetime_scope():
        for i in pipelined(range(n), stages, src="chain"):
            v = Value(tl.load(x + i * 64, (64,), tl.float32))
            w = Value(v.h + 1.0)
            tl.store(x + (i + 1) * 64, w.h)


def test_a_load_is_never_hoisted_above_a_store_to_its_bytes(tmp_path):
    n = 6
    case = kb.Case("chain", chain, (1,), {"x": kb.tensor(((n + 1) * 64,), "float32",
                                                        init=kb.zeros(), role="output")},
                   {"n": n, "stages": 3},
                   reference=lambda **_: {"x": np.repeat(np.arange(n + 1, dtype=np.float32), 64)})
    trace = kb.record(case, tmp_path / "chain.ktrace")
    stores, loads = rows(trace, "dma_write"), rows(trace, "dma_read")
    for i in range(1, n):
        assert loads[i]["t_start_ps"] >= stores[i - 1]["t_end_ps"]
    assert [(r.name, r.count) for r in check(trace).invariants if r.count] == []
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict


@kb.kernel
def scoped_loop(x, y, *, n: int):
    """kernbench's own allocator: a pipelined loop with a scratch_scope per iteration."""
    for i in pipelined(range(n), 3, src="scoped"):
        with tl.scratch_scope():
            v = tl.load(x + i * 256, (256,), tl.float32)
            tl.store(y + i * 256, v * 2.0)


def test_bump_allocator_loads_are_not_hoisted_above_a_scope_rewind(tmp_path):
    n = 5
    case = kb.Case("scoped", scoped_loop, (1,), {
        "x": kb.tensor((n * 256,), "float32", init=kb.randn(seed=3)),
        "y": kb.tensor((n * 256,), "float32", role="output")}, {"n": n},
        reference=lambda x, **_: {"y": x * 2.0})
    trace = kb.record(case, tmp_path / "scoped.ktrace")
    exits, loads = rows(trace, "scope_exit"), rows(trace, "dma_read")
    for i in range(1, n):
        assert loads[i]["t_issue_ps"] >= exits[i - 1]["t_start_ps"]
    assert [(r.name, r.count) for r in check(trace).invariants if r.count] == []
    assert replay(trace.path, case=lambda: case, in_process=True).ok
