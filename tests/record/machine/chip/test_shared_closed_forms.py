"""The shared parts' closed forms on recorded traces (docs/hardware-model.md, "What the
shared parts cost"): N PEs streaming disjoint reads share the stack, min(N x hbm_gbps,
hbm_total_gbps) within one burst per transfer; a GEMM and a MATH op streaming through one
PE's TCM at once take max(compute, TCM bytes / tcm_gbps); a message over h hops arrives h
link latencies plus its bytes at the link's rate later; issue_ns bounds a kernel of many
small ops."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.trace.hw import PRESETS
from kernbench.trace.topology import route

V3 = PRESETS["ahbm-v3"]
TILE = 32 * 1024  # bytes a load moves
TILES = 8


@kb.kernel
def stream(x, y, *, tiles: int, n: int):
    """Every tile its own buffer: the loads of a PE stream back to back."""
    pid = tl.program_id(0)
    for j in range(tiles):
        a = tl.load(x + (pid * tiles + j) * n, (n,), tl.float32)
    tl.store(y + pid * n, a)


def _stream_case(n_pe: int) -> kb.Case:
    n = TILE // 4
    return kb.Case(name="stream", kernel=stream, grid=(n_pe,),
                   tensors={"x": kb.tensor((n_pe * TILES * n,), "float32",
                                           init=kb.randn(seed=0)),
                            "y": kb.tensor((n_pe * n,), "float32", role="output")},
                   params={"tiles": TILES, "n": n},
                   reference=lambda x: {"y": x.reshape(n_pe, TILES, n)[:, -1].ravel()})


def _ops(trace: kb.Trace, name: str) -> pl.DataFrame:
    return trace.ops.filter(pl.col("name").cast(pl.String) == name)


@pytest.mark.parametrize("n_pe", [1, 2, 4, 8, 16, 32])
def test_n_streaming_pes_share_the_stack_at_min_of_their_ports_and_its_total(n_pe, tmp_path):
    hw = dataclasses.replace(V3, name="stream", n_pe=n_pe)
    trace = kb.record(_stream_case(n_pe), tmp_path / "s.ktrace", hw=hw)
    loads = _ops(trace, "dma_read")
    assert len(loads) == n_pe * TILES
    span = (loads["t_start_ps"] + loads["busy_ps"]).max() - loads["t_start_ps"].min()
    gbps = min(n_pe * hw.hbm_gbps, hw.hbm_total_gbps)  # bytes per ns
    ideal = loads["nbytes"].sum() * 1000 / gbps  # ps
    burst = hw.dma_burst_bytes * 1000 / (gbps / n_pe)  # one burst at one PE's share
    assert ideal - 1 <= span <= ideal + TILES * burst, (span, ideal)


@kb.kernel
def gemm_and_math(a, b, x, y, z, *, m: int, k: int, n: int, e: int):
    """A GEMM and an independent MATH op issued together, their operands already in TCM."""
    ta = tl.load(a, (m, k), tl.bfloat16)
    tb = tl.load(b, (k, n), tl.bfloat16)
    tx = tl.load(x, (e,), tl.float32)
    tl.wait(ta, tb, tx)
    c = tl.dot(ta, tb)
    w = tx * 2.0
    tl.store(y, c)
    tl.store(z, w)


@pytest.mark.parametrize("tcm_gbps", [64, 256, 4096])
def test_a_gemm_and_a_math_op_sharing_tcm_take_the_max_of_compute_and_bytes_over_tcm(
        tcm_gbps, tmp_path):
    m, k, n, e = 128, 128, 128, 16384
    hw = dataclasses.replace(V3, name="tcm", tcm_gbps=tcm_gbps, issue_ns=0)
    case = kb.Case(name="pair", kernel=gemm_and_math, grid=(1,),
                   tensors={"a": kb.tensor((m, k), "bfloat16", init=kb.randn(seed=1)),
                            "b": kb.tensor((k, n), "bfloat16", init=kb.randn(seed=2)),
                            "x": kb.tensor((e,), "float32", init=kb.randn(seed=3)),
                            "y": kb.tensor((m, n), "float32", role="output"),
                            "z": kb.tensor((e,), "float32", role="output")},
                   params={"m": m, "k": k, "n": n, "e": e},
                   reference=lambda a, b, x: {
                       "y": a.astype(np.float32) @ b.astype(np.float32), "z": x * 2.0})
    trace = kb.record(case, tmp_path / "p.ktrace", hw=hw)
    pair = trace.ops.filter(pl.col("name").cast(pl.String).is_in(["dot", "mul"]))
    assert len(pair) == 2 and pair["t_start_ps"].n_unique() == 1  # they start together
    start = pair["t_start_ps"][0]
    ends = pair["t_start_ps"] + pair["busy_ps"]
    gemm_ps = (-(-m // hw.gemm_rows) * -(-n // hw.gemm_cols) * k
               + hw.gemm_overhead_cycles) * hw.cycle_ps
    math_ps = (-(-e // hw.math_lanes) * hw.math_op_cost + hw.math_overhead_cycles) * hw.cycle_ps
    tcm_bytes = (m * k * 2 + k * n * 2 + m * n * 4) + (e * 4 + e * 4)
    expected = max(gemm_ps, math_ps, -(-tcm_bytes * 1000 // tcm_gbps))
    assert abs(ends.max() - start - expected) <= 2, (ends.max() - start, expected)
    res = kb.replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict


@kb.kernel
def one_message(x, y, *, n: int, src: int):
    """PE ``src`` sends one tile to its next PE, which stores it."""
    pid = tl.program_id(0)
    if pid == src:
        tl.send("next", tl.load(x, (n,), tl.float32))
    if pid == (src + 1) % tl.num_programs(0):
        tl.store(y, tl.recv("prev", (n,), tl.float32))


@pytest.mark.parametrize("topology,src", [("ring", 3), ("bidir_ring", 3), ("torus2d", 3),
                                          ("mesh2d", 3), ("switch", 0), ("mesh2d", 7)])
def test_a_message_over_h_hops_arrives_h_latencies_plus_its_bytes_later(topology, src,
                                                                       tmp_path):
    n = 4096
    hw = dataclasses.replace(V3, name="net", topology=topology)
    case = kb.Case(name="msg", kernel=one_message, grid=(hw.n_pe,),
                   tensors={"x": kb.tensor((n,), "float32", init=kb.randn(seed=4)),
                            "y": kb.tensor((n,), "float32", role="output")},
                   params={"n": n, "src": src}, reference=lambda x: {"y": x})
    trace = kb.record(case, tmp_path / "m.ktrace", hw=hw)
    send = _ops(trace, "send")
    assert len(send) == 1
    dst = (src + 1) % hw.n_pe
    hops = 1 if topology in ("ring", "bidir_ring") else len(route(topology, hw.n_pe, src, dst))
    if topology in ("mesh2d", "torus2d", "switch"):
        assert hops >= 2  # the case really crosses several links
    bytes_ps = -(-n * 4 * 1000 // int(hw.link_gbps))
    expected = hops * hw.link_latency_ns * 1000 + bytes_ps
    assert send["t_end_ps"][0] - send["t_start_ps"][0] == expected
    res = kb.replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict


@kb.kernel
def many_small(x, y, *, ops: int):
    a = tl.load(x, (16,), tl.float32)
    for _ in range(ops):
        a = a + 1.0
    tl.store(y, a)


@pytest.mark.parametrize("issue_ns", [0, 20, 200])
def test_issue_ns_bounds_a_kernel_of_many_small_ops(issue_ns, tmp_path):
    ops = 200
    hw = dataclasses.replace(V3, name="issue", issue_ns=issue_ns, n_pe=1)
    case = kb.Case(name="small", kernel=many_small, grid=(1,),
                   tensors={"x": kb.tensor((16,), "float32", init=kb.randn(seed=5)),
                            "y": kb.tensor((16,), "float32", role="output")},
                   params={"ops": ops}, reference=lambda x: {"y": x + float(ops)})
    trace = kb.record(case, tmp_path / "i.ktrace", hw=hw)
    issued = trace.ops.filter(pl.col("engine").cast(pl.String) != "none")["t_issue_ps"]
    assert len(issued) == ops + 2
    gaps = issued.sort().diff().drop_nulls()
    assert gaps.min() >= issue_ns * 1000  # one op per issue_ns at most
    math_ps = (1 * hw.math_op_cost + hw.math_overhead_cycles) * hw.cycle_ps
    lat = trace.manifest["t_end_ps"]
    assert lat >= (ops + 1) * issue_ns * 1000  # the issue port bounds it
    assert lat >= ops * math_ps  # and so does the chain of adds
    if issue_ns * 1000 > math_ps:  # issue-bound: the adds wait for the port, not each other
        assert lat <= (ops + 2) * issue_ns * 1000 + 2 * hw.dma_latency_ns * 1000 + 10 * math_ps
