"""The replay section of ``kernbench bench`` runs and reports its figures (not a timed test)."""

from __future__ import annotations

from kernbench.bench_replay import measure


def test_measure_reports_throughput_and_the_numpy_ratio() -> None:
    got = measure(quick=True, repeat=1)
    for key in ("replay_ops_per_s", "replay_vs_numpy", "replay_attention_ops_per_s",
                "replay_attention_vs_numpy"):
        assert got[key] > 0
    assert got["replay_ops"] > 5000
