"""GQA attention for Llama3-70B (docs/adr/0061-0063): decode, prefill, their acceptance numbers."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import metrics
from kernbench.case.references import decode_reference, prefill_reference
from kernbench.kernels.registry import build_case
from kernbench.replay.verdict import compare


def _decode(tmp_path, s_kv, **kw):
    return kb.record(build_case("gqa-decode", {"S_kv": s_kv, **kw}), tmp_path / f"d{s_kv}.ktrace")


def test_decode_records_at_4k_32k_128k_with_identical_peak_scratch(tmp_path):
    peaks, counts = set(), {}
    for s_kv in (4096, 32768, 131072):
        trace = _decode(tmp_path, s_kv)
        m = metrics(trace)
        peaks.add(m["scratch_peak_bytes"])
        counts[s_kv] = m["dma_read_count"]
        assert trace.manifest["grid"] == [8]
        assert sorted(trace.ops["pe"].unique().to_list()) == list(range(8))  # 8 heads, 8 PEs
    assert len(peaks) == 1
    for s_kv, count in counts.items():  # per KV head: Q once, then K and V per tile
        assert count == 8 * (1 + 2 * s_kv // 256)


def test_decode_32k_reaches_efficiency_0_9_and_replays_against_numpy(tmp_path, kb_replay_pool):
    trace = _decode(tmp_path, 32768)
    assert metrics(trace)["efficiency"] >= 0.9
    res = kb.replay(trace.path, pool=kb_replay_pool)
    assert res.verified, res.verdict
    assert res.outputs["o"].shape == (64, 128)


def test_decode_streams_are_both_available_and_lazy_is_faster(tmp_path):
    lazy = _decode(tmp_path, 8192)
    comp = kb.record(build_case("gqa-decode", {"S_kv": 8192, "stream": "composite",
                                               "T_kv": 4096}), tmp_path / "c.ktrace")
    assert lazy.t_end_ps < comp.t_end_ps
    assert set(comp.ops["kind"].cast(str).unique()) >= {"composite"}


def test_decode_composite_replays_right(tmp_path, kb_replay_pool):
    trace = kb.record(build_case("gqa-decode", {"S_kv": 2048, "stream": "composite",
                                                "T_kv": 1024, "H_q": 16, "H_kv": 2}),
                      tmp_path / "c.ktrace")
    res = kb.replay(trace.path, pool=kb_replay_pool)
    assert res.verified, res.verdict


def test_trust_6_references_agree_with_a_direct_per_head_loop_under_the_verdict_tolerance():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (2, 16, 8),
                                                                    (2, 16, 8)))
    out = decode_reference(q, k, v, 0.5)
    for hq in range(4):
        s = q[hq] @ k[hq // 2].T * 0.5
        p = np.exp(s - s.max())
        got = compare(out[hq], ((p / p.sum()) @ v[hq // 2]).astype(np.float32), "float32")
        assert got["ok"], got
    qp = rng.standard_normal((1, 6, 2, 8)).astype(np.float32)
    kp, vp = (rng.standard_normal((1, 6, 8)).astype(np.float32) for _ in range(2))
    o = prefill_reference(qp, kp, vp, 1.0)
    s = qp[0, 3, 1] @ kp[0, :4].T
    p = np.exp(s - s.max())
    got = compare(o[0, 3, 1], ((p / p.sum()) @ vp[0, :4]).astype(np.float32), "float32")
    assert got["ok"], got
    assert not compare(o[0, 3, 1] + 1e-2, o[0, 3, 1], "float32")["ok"]


@pytest.mark.parametrize("params", [{"stream": "mmap"}, {"H_q": 60, "H_kv": 8}, {"T_kv": 500}])
def test_bad_decode_params_are_bad_input(params):
    with pytest.raises(kb.BadInputError):
        build_case("gqa-decode", params)


def test_the_old_validation_ceiling_is_gone(tmp_path):
    """An early validation capped attention at S_q = S_kv_per_rank = 16 because scratch ran
    out (ADR-0063); with per-tile scopes the prefill's scratch does not grow with the
    sequence: 4x the old ceiling records in the same scratch, and replays verified."""
    peaks = {}
    for s in (16, 64):
        case = build_case("gqa-prefill", {"S": s, "T_q": 16, "T_kv": 16, "H_q": 8, "H_kv": 1})
        trace = kb.record(case, tmp_path / f"p{s}.ktrace")
        peaks[s] = trace.manifest["scratch_peak_bytes"]
        budget = trace.manifest["hw"]["kernel_scratch_kib"] * 1024
    assert peaks[64] == peaks[16] <= budget
    res = kb.replay(tmp_path / "p64.ktrace", in_process=True)
    assert res.verified, res.verdict
    assert res.outputs["o"].shape == (1, 64, 8, 128)


def _tiles_by_mask(s, t_q, t_kv):
    """(computed, masked): the (query tile, KV tile) pairs with some visible key, and those
    among them with some hidden key, counted on an explicit causal mask (numpy)."""
    visible = np.arange(s)[None, :] <= np.arange(s)[:, None]
    computed = masked = 0
    for q0 in range(0, s, t_q):
        for k0 in range(0, s, t_kv):
            block = visible[q0:q0 + t_q, k0:k0 + t_kv]
            computed += bool(block.any())
            masked += bool(block.any() and not block.all())
    return computed, masked


def _prefill(tmp_path, **params):
    case = build_case("gqa-prefill", {"H_q": 8, "H_kv": 1, **params})
    return kb.record(case, tmp_path / "p.ktrace")


def _count(trace, name):
    return trace.ops.filter(pl.col("name").cast(pl.String) == name).height


def test_causal_prefill_with_s_not_a_multiple_of_either_tile_matches_numpy(tmp_path,
                                                                          kb_replay_pool):
    trace = kb.record(build_case("gqa-prefill", {"S": 100, "T_q": 16, "T_kv": 48, "H_q": 16,
                                                 "H_kv": 2}), tmp_path / "p.ktrace")
    res = kb.replay(trace.path, pool=kb_replay_pool)
    assert res.verified, res.verdict
    assert res.outputs["o"].shape == (2, 100, 8, 128)


def test_causal_prefill_gemms_are_two_per_tile_not_fully_masked_closed_form(tmp_path):
    s, t_q, t_kv = 512, 16, 128  # aligned: query tile i sees i // (t_kv / t_q) + 1 KV tiles
    n_kv, per = s // t_kv, t_kv // t_q
    trace = _prefill(tmp_path, S=s, T_q=t_q, T_kv=t_kv)
    assert _count(trace, "dot") == 2 * per * n_kv * (n_kv + 1) // 2
    assert _count(trace, "le") == s // t_q  # one diagonal tile per query tile gets the mask


def test_causal_prefill_ragged_tiles_compute_only_tiles_with_a_visible_key(tmp_path):
    s, t_q, t_kv = 200, 16, 48
    computed, masked = _tiles_by_mask(s, t_q, t_kv)
    trace = _prefill(tmp_path, S=s, T_q=t_q, T_kv=t_kv)
    assert _count(trace, "dot") == 2 * computed
    assert _count(trace, "le") == masked
    # K and V once per computed tile, Q once per query tile: nothing fully masked is loaded
    assert _count(trace, "dma_read") == 2 * computed + -(-s // t_q)


def test_causal_prefill_math_engine_waits_only_for_the_first_tile(tmp_path):
    trace = _prefill(tmp_path, S=256, T_q=16, T_kv=64)
    m = metrics(trace)
    hw = trace.manifest["hw"]
    waits = trace.ops.filter(pl.col("wait_ps") > 0)
    assert waits.height == 1  # the first Q.K^T, on the prologue's loads
    first = trace.ops.filter(pl.col("name").cast(pl.String) == "dma_read").head(3)
    assert m["stall_ps"] <= int(first["busy_ps"].sum()) + hw["dma_latency_ns"] * 1000
    # every other op is serial compute or a blocking store: latency is their sum exactly
    stores = trace.ops.filter(pl.col("name").cast(pl.String) == "dma_write")
    exposed = (m["busy_ps_math"] + m["busy_ps_gemm"] + m["stall_ps"]
               + int(stores["busy_ps"].sum()) + stores.height * hw["dma_latency_ns"] * 1000)
    assert m["latency_ps"] == exposed
    assert m["efficiency"] == pytest.approx(m["busy_ps_math"] / exposed, rel=1e-12)


def test_decode_read_channel_never_idles_and_only_the_last_tiles_chain_shows(tmp_path):
    trace = kb.record(build_case("gqa-decode", {"S_kv": 1024, "T_kv": 256, "H_q": 16,
                                                "H_kv": 2}), tmp_path / "d.ktrace")
    m = metrics(trace)
    hw = trace.manifest["hw"]
    ops = trace.ops.filter(pl.col("pe") == 0)
    reads = ops.filter(pl.col("name").cast(pl.String) == "dma_read")
    busy = int(reads["busy_ps"].sum())
    # closed form: Q [G, D] and K, V [S_kv, D] bf16 per head at hbm_gbps, back to back from 0
    assert busy == (8 * 128 + 2 * 1024 * 128) * 2 * 1000 // hw["hbm_gbps"]
    assert int((reads["t_start_ps"] + reads["busy_ps"]).max()) == busy
    landed = int(reads["t_end_ps"].max())
    tail = ops.filter(pl.col("t_start_ps") >= landed)  # what waits for the last tile
    store = tail.filter(pl.col("name").cast(pl.String) == "dma_write")
    before = ops.filter(pl.col("t_start_ps") < landed)
    start = max(landed, int((before["t_start_ps"] + before["busy_ps"]).max()))
    assert int(tail["t_start_ps"].min()) == start  # the last tile's P.V starts when V lands
    assert m["latency_ps"] == start + int(tail["busy_ps"].sum()) + hw["dma_latency_ns"] * 1000
    assert store.height == 1
    assert m["efficiency"] == pytest.approx(busy / m["latency_ps"], rel=1e-12)
