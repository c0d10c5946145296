"""What the shared parts cost (issue 37, docs/hardware-model.md "Measured: ahbm-v2 against
ahbm-v3"): the claims of the v2 -> v3 table as closed forms on small recorded traces, never
wall time. The table's own cells at their documented sizes: tests/docs/
test_shared_parts_figures.py."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import critical_path, metrics
from kernbench.analyze.frames import load_shared
from kernbench.analyze.path_summary import summary
from kernbench.kernels.registry import build_case
from kernbench.trace.hw import PRESETS
from tests.triton.kernels import vector_add

#: 8 KV heads x 4096 tokens of K/V (16 MiB), split into one slice per PE
TOKENS = 8 * 4096


def _decode(n_pe: int, preset: str, tmp_path) -> dict:
    hw = dataclasses.replace(PRESETS[preset], n_pe=n_pe)
    case = build_case("gqa-decode", {"H_kv": n_pe, "H_q": 8 * n_pe, "S_kv": TOKENS // n_pe})
    trace = kb.record(case, tmp_path / f"{preset}-{n_pe}.ktrace", hw=hw)
    assert trace.ops["pe"].n_unique() == n_pe  # one slice on every PE
    return metrics(trace)


@pytest.fixture(scope="module")
def decode(tmp_path_factory) -> dict[tuple[str, int], dict]:
    out = tmp_path_factory.mktemp("decode")
    return {(preset, n): _decode(n, preset, out)
            for preset in ("ahbm-v2", "ahbm-v3") for n in (8, 16, 32)}


def _port_floor_ps(m: dict, preset: str, n_pe: int) -> float:
    """The K/V bytes at ``min(n_pe x hbm_gbps, hbm_total_gbps)`` (0: no total), in ps."""
    hw = PRESETS[preset]
    gbps = min(n_pe * hw.hbm_gbps, hw.hbm_total_gbps or float("inf"))
    return m["dma_read_bytes"] * 1000 / gbps


@pytest.mark.parametrize("preset", ["ahbm-v2", "ahbm-v3"])
def test_decode_latency_is_its_kv_bytes_at_min_of_the_ports_and_the_stack(decode, preset):
    """Every point: the closed form, plus at most the last tile's latency and the store."""
    hw = PRESETS[preset]
    for n in (8, 16, 32):
        m = decode[preset, n]
        floor = _port_floor_ps(m, preset, n)
        assert floor <= m["latency_ps"] <= floor + 3 * hw.dma_latency_ns * 1000, (n, m)


def test_decode_saturates_at_the_stack_on_v3_while_v2_halves_per_doubling(decode):
    v2 = [decode["ahbm-v2", n]["latency_ps"] for n in (8, 16, 32)]
    v3 = [decode["ahbm-v3", n]["latency_ps"] for n in (8, 16, 32)]
    # v2: the ports' time halves, the tail (the last tile's latency, the store) stays
    tails = [lat - _port_floor_ps(decode["ahbm-v2", n], "ahbm-v2", n)
             for lat, n in zip(v2, (8, 16, 32), strict=True)]
    assert max(tails) - min(tails) <= 50_000, tails
    assert v2[0] / v2[1] > 1.8 and v2[1] / v2[2] > 1.6, v2
    # v3: one stack whatever the number of PEs; from 8 PEs on (1024 GB/s of ports) it binds
    assert max(v3) - min(v3) <= 0.01 * min(v3), v3
    assert all(decode["ahbm-v3", n]["efficiency_bound"] == "hbm_stack" for n in (8, 16, 32))
    assert v3[0] > v2[0]  # 8 ports ask 1024 GB/s of a stack that serves 819.2


@pytest.fixture(scope="module")
def prefill(tmp_path_factory) -> dict[str, kb.Trace]:
    out = tmp_path_factory.mktemp("prefill")
    case = {"S": 256, "H_q": 8, "H_kv": 1, "schedule": "pipelined"}
    return {hw: kb.record(build_case("gqa-prefill", case), out / f"{hw}.ktrace", hw=hw)
            for hw in ("ahbm-v2", "ahbm-v3")}


def test_pipelined_prefill_pays_for_its_tcm_port_and_the_path_says_so(prefill):
    v2, v3 = prefill["ahbm-v2"], prefill["ahbm-v3"]
    m2, m3 = metrics(v2), metrics(v3)
    assert m3["latency_ps"] > m2["latency_ps"]
    waits = (load_shared(v3).join(v3.ops.select("op_id", "engine"), on="op_id")
             .filter(pl.col("engine").cast(pl.String) == "math")
             .group_by("part").agg(pl.col("wait_ps").sum()))
    tcm = dict(waits.iter_rows())["tcm"]
    # the MATH engine's ops are longer by exactly their TCM waits (an op's busy time holds
    # its wait for the port), so the efficiency against the busiest engine barely moves
    assert m3["busy_max_ps_math"] - m2["busy_max_ps_math"] == tcm > 0
    assert m3["efficiency_bound"] == "math"
    parts = {p["part"]: p["path_ps"]
             for p in summary(critical_path(v3), m3["latency_ps"])["by_part"]}
    assert parts["tcm"] > 0 and parts["hbm"] == parts["link"] == 0
    # what v3 added to the latency is what the path spent waiting for TCM and issue
    assert m3["latency_ps"] - m2["latency_ps"] <= parts["tcm"] + parts["issue"]


def test_triton_add_on_v3_is_bound_by_the_stack(tmp_path):
    trace = kb.record(vector_add.case(1 << 18, 1024), tmp_path / "add.ktrace", hw="ahbm-v3")
    m = metrics(trace)
    moved = m["dma_read_bytes"] + m["dma_write_bytes"]  # x and y in, out back
    stack = moved * 1000 / PRESETS["ahbm-v3"].hbm_total_gbps
    assert m["efficiency_bound"] == "hbm_stack"
    assert m["roofline_ps_hbm_stack"] == pytest.approx(stack)
    assert stack <= m["latency_ps"]
    assert m["efficiency"] == pytest.approx(stack / m["latency_ps"])
