"""Each engine's closed-form formula (docs/hardware-model.md), reproduced by single-op kernels."""

from __future__ import annotations

import math
import random

import pytest
import simpy

import kernbench as kb
from kernbench import tl
from kernbench.record.commands import Cmd
from kernbench.record.machine import asynchronous
from kernbench.record.machine.pe import PEDriver
from kernbench.record.machine.timing import TIMING, models
from kernbench.record.rows.writer import OpWriter
from kernbench.schemas.ops import OPS, SCOPE, Cost
from kernbench.trace.hw import HwConfig, load_hw
from tests.conftest import rows

HW = HwConfig()


@kb.kernel
def load_only(x, *, n: int):
    tl.wait(tl.load(x, (n,), tl.float32))


@pytest.mark.parametrize("n", [1, 33, 512, 4096])
def test_dma_read_occupies_channel_for_bytes_over_bandwidth_then_adds_latency(rec, n):
    trace = rec(load_only, {"x": kb.tensor((n,), "float32")}, params={"n": n})
    (r,) = rows(trace, "dma_read")
    busy = math.ceil(n * 4 * 1000 / HW.hbm_gbps)
    assert r["busy_ps"] == busy
    assert r["t_end_ps"] - r["t_start_ps"] == busy + HW.dma_latency_ns * 1000
    assert r["engine"] == "dma_rd" and r["nbytes"] == n * 4


@kb.kernel
def store_zeros(y, *, n: int):
    tl.store(y, tl.zeros((n,), tl.bfloat16))


@pytest.mark.parametrize("n", [8, 1000])
def test_dma_write_converts_to_tensor_dtype_and_costs_its_bytes(rec, n):
    trace = rec(store_zeros, {"y": kb.tensor((n,), "float32", role="output")}, params={"n": n})
    (w,) = rows(trace, "dma_write")
    assert w["nbytes"] == n * 4  # written in the tensor's dtype
    assert w["busy_ps"] == math.ceil(n * 4 * 1000 / HW.hbm_gbps)
    assert w["t_end_ps"] == w["t_start_ps"] + w["busy_ps"] + HW.dma_latency_ns * 1000


@kb.kernel
def one_dot(a, b, *, m: int, n: int, k: int):
    x = tl.load(a, (m, k), tl.bfloat16)
    y = tl.load(b, (k, n), tl.bfloat16)
    tl.dot(x, y)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (128, 128, 64), (129, 8, 300), (64, 257, 128)])
def test_gemm_cycles_are_tiles_times_k_plus_overhead(rec, m, n, k):
    trace = rec(one_dot, {"a": kb.tensor((m, k), "bfloat16"), "b": kb.tensor((k, n), "bfloat16")},
                params={"m": m, "n": n, "k": k})
    (d,) = rows(trace, "dot")
    cycles = math.ceil(m / 128) * math.ceil(n / 128) * k + 32
    assert d["busy_ps"] == cycles * 1000
    assert d["t_end_ps"] == d["t_start_ps"] + cycles * 1000
    assert d["flops"] == 2 * m * n * k
    assert d["engine"] == "gemm"


@kb.kernel
def math_ops(*, n: int):
    x = tl.full((n,), 2.0, tl.float32)
    x + x
    tl.exp(x)
    x / 3.0
    tl.sum(x, axis=0)
    tl.softmax(tl.reshape(x, (1, n)))


@pytest.mark.parametrize("n", [1, 128, 129, 1000])
def test_math_cycles_are_lane_groups_times_op_cost_plus_overhead(rec, n):
    trace = rec(math_ops, {}, params={"n": n})
    groups = math.ceil(n / 128)
    cost = {"fill": 1, "add": 1, "exp": 2, "div": 2, "sum": 1, "softmax": HW.math_softmax_cost}
    for r in rows(trace):
        assert r["engine"] == "math"
        assert r["busy_ps"] == (groups * cost[r["name"]] + 8) * 1000, r["name"]


def test_reductions_count_input_elements(rec):
    trace = rec(math_ops, {}, params={"n": 1000})
    (s,) = rows(trace, "sum")
    assert s["num_elements"] == 1  # produced
    assert s["busy_ps"] == (math.ceil(1000 / 128) + 8) * 1000  # costed on the 1000 inputs


def test_engines_serve_in_issue_order_with_capacity_one(rec):
    @kb.kernel
    def two_loads(x):
        a = tl.load(x, (1024,), tl.float32)
        b = tl.load(x + 1024, (1024,), tl.float32)
        tl.wait(a, b)

    trace = rec(two_loads, {"x": kb.tensor((2048,), "float32")})
    first, second = rows(trace, "dma_read")
    assert second["t_start_ps"] == first["t_start_ps"] + first["busy_ps"]
    assert second["t_end_ps"] == second["t_start_ps"] + second["busy_ps"] + 500_000



@pytest.mark.parametrize("preset", ["ahbm-v1", "ahbm-v2"])
def test_a_pes_bound_timing_models_give_the_registrys_busy_and_latency_for_every_op(
        preset, tmp_path):
    writer = OpWriter(tmp_path / "ops.parquet")
    pe = PEDriver(0, load_hw(preset), simpy.Environment(), writer)
    bound = models(pe)
    assert set(bound) == set(TIMING)
    rng = random.Random(0)
    for op, spec in OPS.items():
        if spec.cost not in (Cost.MATH, Cost.TRANSCENDENTAL, Cost.SOFTMAX):
            assert bound[op] is TIMING[op]
            continue
        for n in [1, 2, 15, 16, 17, 255, 256, 257, *rng.sample(range(1, 1 << 20), 20)]:
            cmd = Cmd(op, (), None, n, 4 * n, (n,), "k.py:1")
            assert bound[op](pe, cmd) == TIMING[op](pe, cmd), (op, n)
    writer.abort()


def test_the_async_ops_timed_without_claims_have_no_engine_queue_and_write_nothing(tmp_path):
    writer = OpWriter(tmp_path / "ops.parquet")
    pe = PEDriver(0, load_hw("ahbm-v2"), simpy.Environment(), writer)
    marked = [op for op, (_, _, handler) in pe.by_op.items() if handler is asynchronous.mark]
    assert marked
    for op in marked:  # mark skips the queue and the scoreboard: nothing there to do
        _, engine, _ = pe.by_op[op]
        assert pe.queues.get(engine) is None and op in SCOPE
    writer.abort()
