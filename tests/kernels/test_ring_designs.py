"""The ring-attention design variants: the decode combine (tree vs chain) and the causal
prefill's token layout (contiguous vs striped), each replayed against numpy."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import check, metrics
from kernbench.kernels.registry import build_case
from kernbench.kernels.ring import chunk_kind, rotated_chunks, visible_shift
from kernbench.kernels.ring_decode import tree_links
from kernbench.trace.hw import HwConfig

HW16 = HwConfig(n_pe=16)


def _decode(tmp_path, n, combine, s=128, hw=HW16, name="d"):
    case = build_case("ring-attention", {"n_ranks": n, "S_kv_per_rank": s, "phase": "decode",
                                         "combine": combine})
    return kb.record(case, tmp_path / f"{name}-{combine}-{n}.ktrace", hw=hw)


def _hops_to_root(sends: pl.DataFrame) -> int:
    """The longest path of partial messages into rank 0, following each sender's target."""
    to = dict(zip(sends["pe"].to_list(),
                  sends["attrs"].str.json_path_match("$.to").cast(pl.Int64).to_list(),
                  strict=True))
    depth = 0
    for r in to:
        hops, at = 0, r
        while at != 0:
            at, hops = to[at], hops + 1
            assert hops <= len(to), "the partials go round in a cycle"
        depth = max(depth, hops)
    return depth


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
def test_tree_combine_sends_one_partial_per_rank_and_reaches_rank_0_in_the_ring_radius(
        tmp_path, n):
    sends = _decode(tmp_path, n, "tree").ops.filter(pl.col("name").cast(pl.String) == "send")
    assert sends.height == 3 * (n - 1)  # (m, l, O) once from every rank but the root
    assert sorted(set(sends["pe"].to_list())) == list(range(1, n))
    assert _hops_to_root(sends) == n // 2
    chain = _decode(tmp_path, n, "chain").ops.filter(pl.col("name").cast(pl.String) == "send")
    assert chain.height == 3 * n * (n - 1)  # every rank forwards n - 1 partials


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
def test_one_more_microsecond_per_hop_costs_the_tree_n_over_2_and_the_chain_n_minus_1(
        tmp_path, n):
    slow = dataclasses.replace(HW16, link_latency_ns=HW16.link_latency_ns + 1000)
    for combine, steps in (("tree", n // 2), ("chain", n - 1)):
        base = _decode(tmp_path, n, combine)
        later = _decode(tmp_path, n, combine, hw=slow, name="slow")
        assert later.t_end_ps - base.t_end_ps == steps * 1_000_000


def test_tree_links_make_two_branches_that_meet_at_rank_0():
    assert tree_links(0, 1) == ([], None)
    assert tree_links(0, 2) == (["next"], None) and tree_links(1, 2) == ([], "prev")
    assert [tree_links(r, 5) for r in range(5)] == [
        (["next", "prev"], None), (["next"], "prev"), ([], "prev"), ([], "next"),
        (["prev"], "next")]


@pytest.mark.parametrize("n", [3, 5, 8])
def test_tree_and_chain_combines_replay_to_the_same_output_as_numpy(tmp_path, n, kb_replay_pool):
    hw = HwConfig(n_pe=8)
    outs = {}
    for combine in ("tree", "chain"):
        res = kb.replay(_decode(tmp_path, n, combine, s=256, hw=hw).path, pool=kb_replay_pool)
        assert res.verified, res.verdict
        outs[combine] = res.outputs["o"].astype(np.float32)
    # the merges happen in another order, so the bf16 outputs agree to rounding, not bits
    np.testing.assert_allclose(outs["tree"], outs["chain"], atol=2 ** -7, rtol=0)


def test_tree_combine_is_faster_than_the_chain_at_8_ranks(tmp_path):
    hw = HwConfig()
    tree, chain = (_decode(tmp_path, 8, c, s=1024, hw=hw) for c in ("tree", "chain"))
    assert chain.t_end_ps - tree.t_end_ps >= 3 * hw.link_latency_ns * 1000  # 7 -> 4 hops


def test_visible_shift_places_tokens_contiguously_or_striped():
    # contiguous: rank r's token j is r*S + j; striped: j*n + r
    assert visible_shift("contiguous", 2, 1, 4, 64) == 64
    assert visible_shift("contiguous", 1, 2, 4, 64) == -64
    assert visible_shift("striped", 2, 1, 4, 64) == 0  # rank 1's token j precedes rank 2's
    assert visible_shift("striped", 1, 2, 4, 64) == -1  # ... rank 2's token j follows
    assert chunk_kind(0, 64, 16, 64, 0) == "skip"
    assert chunk_kind(64, 0, 16, 64, 0) == "full"
    assert chunk_kind(0, 0, 16, 64, 0) == "diagonal"


def _causal(tmp_path, layout, n=4, s=128):
    case = build_case("ring-attention", {"n_ranks": n, "S_kv_per_rank": s, "T_q": 16,
                                         "causal": True, "layout": layout})
    return kb.record(case, tmp_path / f"causal-{layout}.ktrace")


def _compute_busy_per_pe(trace) -> list[int]:
    ops = trace.ops.filter(pl.col("engine").cast(pl.String).is_in(["gemm", "math"]))
    return ops.group_by("pe").agg(pl.col("busy_ps").sum()).sort("pe")["busy_ps"].to_list()


@pytest.mark.parametrize("layout", ["contiguous", "striped"])
def test_causal_ring_prefill_replays_against_numpy_and_checks_clean(tmp_path, layout,
                                                                    kb_replay_pool):
    trace = _causal(tmp_path, layout, n=3, s=128)
    assert check(trace).exit_code == 0, check(trace).to_text()
    res = kb.replay(trace.path, pool=kb_replay_pool)
    assert res.verified, res.verdict


def test_striped_layout_rotates_only_the_chunks_some_rank_sees():
    # striped: query tile at q0 sees the chunks up to its diagonal on every rank
    assert [rotated_chunks("striped", q0, 4, 256, 16, 64) for q0 in (0, 48, 64, 240)] == \
        [1, 1, 2, 4]
    # contiguous: the last rank sees every chunk of rank 0
    assert {rotated_chunks("contiguous", q0, 4, 256, 16, 64) for q0 in (0, 240)} == {4}


def test_striped_causal_prefill_balances_the_ranks_and_contiguous_does_not(tmp_path):
    striped, contiguous = _causal(tmp_path, "striped"), _causal(tmp_path, "contiguous")
    for trace in (striped, contiguous):  # the metric against an independent recomputation
        busy = _compute_busy_per_pe(trace)
        assert metrics(trace)["pe_busy_balance"] == pytest.approx(max(busy) / np.mean(busy))
    assert metrics(striped)["pe_busy_balance"] <= 1.05
    assert metrics(contiguous)["pe_busy_balance"] >= 1.4
    busy = _compute_busy_per_pe(contiguous)
    assert busy == sorted(busy)  # the later a rank's tokens, the more keys they see


def test_causal_prefill_skips_fully_masked_chunks(tmp_path):
    # 4 ranks x 128 tokens, 8 query tiles of 16, chunks of 64: contiguous computes, per query
    # tile of rank r, r full blocks (2 chunks each) and its own chunks up to the diagonal
    dots = _causal(tmp_path, "contiguous").ops.filter(pl.col("name").cast(pl.String) == "dot")
    per_pe = dots.group_by("pe").len().sort("pe")["len"].to_list()
    own = sum(t * 16 // 64 + 1 for t in range(8))  # chunks up to the diagonal, per rank
    assert per_pe == [2 * (8 * 2 * r + own) for r in range(4)]  # two dots per chunk


def test_ring_attention_rejects_unknown_variants():
    with pytest.raises(kb.BadInputError, match="combine 'ring' is not one of"):
        build_case("ring-attention", {"phase": "decode", "combine": "ring"})
    with pytest.raises(kb.BadInputError, match="layout 'zigzag' not one of"):
        build_case("ring-attention", {"causal": True, "layout": "zigzag"})
    with pytest.raises(kb.BadInputError, match="causal=True is a prefill option"):
        build_case("ring-attention", {"phase": "decode", "causal": True})
