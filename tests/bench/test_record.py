"""The record section's v2/v3 side by side (issue 37's cost) records the same kernels on both
presets and reports each one's ops per second and their ratio (not a timed test: no figure
is compared with a time; each ratio is checked against the figures it is the ratio of)."""

from __future__ import annotations

import pytest

from kernbench.bench.record import PRESETS, SIDE_BY_SIDE, side_by_side


@pytest.fixture(scope="module")
def got() -> dict:
    return side_by_side(quick=True, repeat=1)


def test_the_presets_are_ahbm_v2_and_the_chips_ahbm_v3() -> None:
    from kernbench.trace.hw import PRESETS as HW

    v2, v3 = (HW[p] for p in PRESETS)
    assert not v2.shared and v3.shared  # the closed form, then the chip


def test_every_kernel_reports_ops_per_second_on_both_presets(got: dict) -> None:
    for kernel in SIDE_BY_SIDE:
        for preset in ("ahbm_v2", "ahbm_v3"):
            assert got[f"record_{kernel}_ops_per_s_{preset}"] > 0
    # small-ops: 7 ops per iteration, a scope around the whole chain (quick: 500 iterations)
    assert got["record_small_ops_ops"] == 7 * 500 + 2


def test_each_ratio_is_v3s_ops_per_second_over_v2s(got: dict) -> None:
    """v3 over v2 (below 1 when the chip is slower), within the rounding of the figures."""
    for kernel in SIDE_BY_SIDE:
        v2 = got[f"record_{kernel}_ops_per_s_ahbm_v2"]
        v3 = got[f"record_{kernel}_ops_per_s_ahbm_v3"]
        assert got[f"record_{kernel}_v3_vs_v2"] == pytest.approx(v3 / v2, abs=2e-3)
    assert got["record_v3_vs_v2"] == pytest.approx(
        got["record_ops_per_s_ahbm_v3"] / got["record_ops_per_s_ahbm_v2"], abs=2e-3)
    lo = min(got[f"record_{k}_v3_vs_v2"] for k in SIDE_BY_SIDE)
    hi = max(got[f"record_{k}_v3_vs_v2"] for k in SIDE_BY_SIDE)
    assert lo - 2e-3 <= got["record_v3_vs_v2"] <= hi + 2e-3  # a mean of the kernels'
