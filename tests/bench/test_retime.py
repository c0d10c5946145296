"""The bench's ``retime_vs_record`` section (figures are the bench's, never asserted here):
it runs a recording and a retime as whole processes side by side and reports their ratio."""

from __future__ import annotations

from kernbench.bench import retime
from kernbench.bench.run import SECTIONS


def test_the_bench_reports_retime_vs_record_side_by_side():
    assert ("retime", retime.measure) in SECTIONS
    got = retime.measure(workloads={"scale": ("scale-exp", {}, {"n": 1024, "tile": 256})},
                         quick=True, sweep=False)
    assert set(got) == {"retime_vs_record_scale", "scale_record_s", "scale_retime_s",
                        "scale_record_wall_s", "scale_retime_wall_s"}
    ratio = got["scale_retime_s"] / got["scale_record_s"]  # of the rounded seconds
    assert abs(got["retime_vs_record_scale"] - ratio) <= 0.002 * max(1.0, ratio)
    assert {"triton_matmul", "prefill_2k", "flagship_8k"} <= set(retime.WORKLOADS)
