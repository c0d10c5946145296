"""The replay section of ``kernbench bench`` runs and reports its figures (not a timed test:
no figure is compared with a time; each ratio is checked against the seconds it is the ratio
of, each op count against its closed form)."""

from __future__ import annotations

import pytest

from kernbench.bench.replay import measure


def _ratio_of(ratio: float, num: float, den: float, digits: int) -> bool:
    """``ratio`` (rounded to 3 digits) is ``num / den`` for some values that round, to
    ``digits`` decimals, to the ``num`` and ``den`` reported."""
    half, r = 0.5 * 10.0 ** -digits, 0.0005
    lo = (num - half) / (den + half)
    hi = (num + half) / (den - half) if den > half else float("inf")
    return lo - r <= ratio <= hi + r


@pytest.fixture(scope="module")
def got() -> dict:
    return measure(quick=True, repeat=1)


def test_op_counts_are_the_quick_workloads_closed_forms(got: dict) -> None:
    # small ops: 8 programs; one load of w, then per tile scope enter, load, mul, exp, add,
    # max, sub, mul, store, scope exit (quick: 80 tiles; RSS: 20 and 200 tiles)
    assert got["replay_ops"] == 8 * (1 + 80 * 10)
    assert got["replay_peak_rss_ops_small"] == 8 * (1 + 20 * 10)
    assert got["replay_peak_rss_ops_large"] == 8 * (1 + 200 * 10)
    # flash attention, 4096 keys in 16-row tiles: load q, m, l, acc, then per tile scope
    # enter, two loads, dot, scale, max, maximum, two subs, two exps, mul, sum, add, cast,
    # dot, mul, add, three copy_to, scope exit; then acc / l and the store
    assert got["replay_attention_ops"] == 4 + 22 * (4096 // 16) + 2
    # ops per second is the op count over the replay's seconds (rounded to 4 decimals)
    for ops, s, per_s in (("replay_ops", "replay_s", "replay_ops_per_s"),
                          ("replay_attention_ops", "replay_attention_s",
                           "replay_attention_ops_per_s")):
        n, t = got[ops], got[s]
        assert n / (t + 0.5e-4) - 0.5 <= got[per_s] <= n / (t - 0.5e-4) + 0.5, (per_s, got[per_s])


@pytest.mark.parametrize(("ratio", "num", "den", "digits"), [
    ("replay_vs_numpy", "replay_s", "replay_numpy_s", 4),
    ("replay_attention_vs_numpy", "replay_attention_s", "replay_attention_numpy_s", 4),
    ("replay_prefill_vs_numpy", "replay_prefill_s", "replay_prefill_numpy_s", 3),
    ("replay_decode_32k_vs_numpy", "replay_decode_32k_s", "replay_decode_32k_numpy_s", 3),
    ("replay_process_decode_32k_vs_numpy", "replay_process_decode_32k_s",
     "replay_process_decode_32k_numpy_s", 3),
    ("replay_process_decode_32k_cpu_vs_numpy", "replay_process_decode_32k_cpu_s",
     "replay_process_decode_32k_numpy_cpu_s", 3),
    ("replay_process_prefill_1k_vs_numpy", "replay_process_prefill_1k_s",
     "replay_process_prefill_1k_numpy_s", 3),
    ("replay_process_prefill_1k_cpu_vs_numpy", "replay_process_prefill_1k_cpu_s",
     "replay_process_prefill_1k_numpy_cpu_s", 3),
    ("replay_peak_rss_ratio", "replay_peak_rss_mb_large", "replay_peak_rss_mb_small", 1),
])
def test_each_ratio_is_ours_over_numpys(got: dict, ratio: str, num: str, den: str,
                                        digits: int) -> None:
    """Ours over theirs, not theirs over ours: a ratio is checked against the two figures
    it is made of (rounded as reported)."""
    assert got[num] > 0 and got[den] > 0, (num, den)
    assert _ratio_of(got[ratio], got[num], got[den], digits), (ratio, got[ratio], got[num],
                                                               got[den])


def test_peak_rss_is_in_megabytes_of_a_python_process(got: dict) -> None:
    # a process that imported numpy and pyarrow holds tens of MB; bytes or KiB would be
    # thousands of times more, GB a thousand times less
    for key in ("replay_peak_rss_mb_small", "replay_peak_rss_mb_large"):
        assert 20 < got[key] < 8192, (key, got[key])
