"""Ring attention over IPCQ: records at scale, replays reduced, hides its link time."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench.bench.panel import FREE_LINK, link_hidden
from kernbench.kernels.registry import build_case


@pytest.mark.parametrize("phase,ranks,s", [("prefill", 4, 256), ("decode", 4, 512),
                                           ("prefill", 1, 128)])
def test_reduced_ring_replays_against_numpy(tmp_path, phase, ranks, s, kb_replay_pool):
    trace = kb.record(build_case("ring-attention", {"n_ranks": ranks, "S_kv_per_rank": s,
                                                    "phase": phase}), tmp_path / "r.ktrace")
    res = kb.replay(trace.path, pool=kb_replay_pool)
    assert res.verified, res.verdict


def test_ring_prefill_8_ranks_4096_records_and_hides_90_percent_of_link_time(tmp_path):
    case = build_case("ring-attention", {"n_ranks": 8, "S_kv_per_rank": 4096})
    trace = kb.record(case, tmp_path / "r.ktrace")
    free = kb.record(case, tmp_path / "f.ktrace", hw=FREE_LINK)
    ops = trace.ops
    sends = ops.filter(ops["name"].cast(str) == "send")
    assert sends.height == 8 * 7 * 2 * (4096 // 64)  # K and V chunks, n-1 hops each
    per_rank = (sends["t_end_ps"] - sends["t_start_ps"]).sum() / 8
    assert link_hidden(trace.t_end_ps, free.t_end_ps, per_rank) >= 0.9
    assert trace.manifest["scratch_peak_bytes"] <= 1 << 20


def test_link_hidden_is_the_share_of_link_time_that_did_not_add_latency():
    assert link_hidden(100, 100, 50) == 1.0
    assert link_hidden(110, 100, 50) == pytest.approx(0.8)
    assert link_hidden(200, 100, 50) == 0.0
    assert link_hidden(90, 100, 50) == 1.0
