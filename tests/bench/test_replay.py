"""The replay section of ``kernbench bench`` runs and reports its figures (not a timed test)."""

from __future__ import annotations

from kernbench.bench.replay import measure


def test_measure_reports_throughput_ratios_and_peak_rss() -> None:
    got = measure(quick=True, repeat=1)
    for key in ("replay_ops_per_s", "replay_vs_numpy", "replay_attention_ops_per_s",
                "replay_attention_vs_numpy", "replay_prefill_vs_numpy",
                "replay_decode_32k_vs_numpy", "replay_peak_rss_mb_small",
                "replay_peak_rss_mb_large"):
        assert got[key] > 0, key
    assert got["replay_ops"] > 5000
    assert got["replay_peak_rss_ops_large"] >= 9 * got["replay_peak_rss_ops_small"]
