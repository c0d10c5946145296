"""Ring decode combining by PE index (ADR-0751): ``combine="direct"`` (every rank's partial
straight to rank 0) and ``combine="binomial"`` (a binomial tree by index), for topologies
that route a message to any PE (docs/adr/0750). Replayed against numpy on every machine; the
figures of 8 x 4096 are in docs/attention-designs.md and ``kernbench bench``
(``ring_decode_v3_*``)."""

from __future__ import annotations

import dataclasses
import math

import polars as pl
import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case
from kernbench.kernels.ring_decode import binomial_links
from kernbench.testing import assert_check_ok
from kernbench.trace.hw import PRESETS
from kernbench.trace.topology import route


def _v3(topology: str) -> kb.HwConfig:
    return dataclasses.replace(PRESETS["ahbm-v3"], topology=topology)


def _decode(tmp_path, combine, hw, n=5, s=128, name="d"):
    case = build_case("ring-attention", {"n_ranks": n, "S_kv_per_rank": s, "phase": "decode",
                                         "combine": combine})
    return kb.record(case, tmp_path / f"{name}-{combine}-{n}.ktrace", hw=hw)


def _sends(trace: kb.Trace) -> pl.DataFrame:
    ops = trace.ops.filter(pl.col("name").cast(pl.String) == "send")
    return ops.with_columns(to=pl.col("attrs").str.json_path_match("$.to").cast(pl.Int64))


@pytest.mark.parametrize("n", range(1, 34))
def test_the_binomial_tree_by_pe_index_reaches_rank_0_in_log2_n_levels(n):
    """Rank r sends in level log2(lowbit(r)), after merging what its sources sent in lower
    levels; rank 0 merges one partial per level."""
    links = [binomial_links(r, n) for r in range(n)]
    assert links[0][1] is None

    def level(r: int) -> int:
        return (r & -r).bit_length() - 1

    for r in range(1, n):
        sink = links[r][1]
        assert sink is not None and sink == r - (r & -r) and r in links[sink][0]
        assert all(level(s) < level(r) for s in links[r][0])
    levels = math.ceil(math.log2(n)) if n > 1 else 0
    assert max((level(r) + 1 for r in range(1, n)), default=0) == levels
    assert [level(s) for s in links[0][0]] == list(range(levels))  # nearest first
    assert sum(len(src) for src, _ in links) == n - 1


@pytest.mark.parametrize("hw", ["ahbm-v1", "ahbm-v2", "ahbm-v3", "switch", "mesh2d"])
@pytest.mark.parametrize("combine", ["direct", "binomial"])
def test_combines_by_pe_index_replay_verified_on_every_machine(tmp_path, hw, combine):
    on = _v3(hw) if hw in ("switch", "mesh2d") else hw
    trace = _decode(tmp_path, combine, on)
    sends = _sends(trace)
    assert sends.height == 3 * (5 - 1)  # (m, l, O) once from every rank but the root
    if combine == "direct":
        assert (sends["to"] == 0).all()
    res = kb.replay(trace.path, in_process=True)
    assert res.ok and res.verdict.get("reference") is not None, res.verdict
    if hw != "ahbm-v1":
        assert_check_ok(trace)
    # the critical path explains the whole latency: on the chip a rank that waited for a
    # partial goes on once it is sent (a ``message`` edge), not when its receive was posted
    path = kb.analyze.critical_path(trace)
    assert path["path_ps"].sum() == trace.t_end_ps, path.head(3)


@pytest.mark.parametrize("topology", ["switch", "torus2d"])
def test_on_routed_links_of_1us_a_hop_the_direct_combine_beats_the_rings_tree(tmp_path,
                                                                             topology):
    """Chip-to-chip hops (ahbm-v2's 1 us): one message deep is the shallowest combine."""
    hw = dataclasses.replace(_v3(topology), link_latency_ns=1000)
    latency = {c: _decode(tmp_path, c, hw, n=8, s=256).t_end_ps
               for c in ("tree", "direct", "binomial")}
    assert latency["direct"] < latency["binomial"] < latency["tree"], latency


@pytest.mark.parametrize("topology", ["switch", "torus2d"])
def test_on_ahbm_v3s_on_chip_links_the_binomial_combine_is_the_fastest(tmp_path, topology):
    """On-chip hops (ahbm-v3's 20 ns, docs/adr/0752): the hops cost little, so the binomial
    tree's merges on log2 n ranks at once beat `direct`'s 7 merges in series on rank 0."""
    hw = _v3(topology)
    assert hw.link_latency_ns == 20
    latency = {c: _decode(tmp_path, c, hw, n=8, s=256).t_end_ps
               for c in ("tree", "direct", "binomial")}
    assert latency["binomial"] < min(latency["direct"], latency["tree"]), latency


def test_on_a_switch_the_combine_costs_two_hops_and_the_store_after_the_last_partial(
        tmp_path):
    """Why ring decode cannot pass 0.90 on links of 1 us a hop (docs/attention-designs.md): a
    rank's partial exists only once its last K/V tile is in, and then still crosses two links
    (PE -> switch -> rank 0) of link_latency each, before rank 0 merges it and stores O."""
    hw = dataclasses.replace(_v3("switch"), link_latency_ns=1000)
    trace = _decode(tmp_path, "direct", hw, n=8, s=512)
    sends = _sends(trace)
    hops = {len(route("switch", 8, pe, 0)) for pe in sends["pe"].to_list()}
    assert hops == {2}
    last_partial = int(sends["t_start_ps"].max())
    tail = trace.t_end_ps - last_partial
    floor = 2 * hw.link_latency_ns * 1000 + hw.dma_latency_ns * 1000  # two hops, O's store
    assert floor <= tail < floor + 1_000_000


@pytest.mark.parametrize("topology", ["switch", "torus2d"])
def test_ring_decode_8x4096_reaches_090_on_ahbm_v3s_switch_and_torus2d(tmp_path, topology):
    """Issue 37's figure (docs/hardware-model.md, docs/adr/0752): ahbm-v3's stack serves
    the 16 MiB of K/V by 20.5 us; on 20 ns hops the binomial combine adds 2 us after it."""
    trace = _decode(tmp_path, "binomial", _v3(topology), n=8, s=4096)
    m = kb.analyze.metrics(trace)
    assert m["efficiency"] >= 0.90, m["efficiency"]
    stack_ps = m["dma_read_bytes"] * 1000 / PRESETS["ahbm-v3"].hbm_total_gbps
    assert stack_ps <= trace.t_end_ps <= stack_ps + 2_500_000
