"""``engine_arbitration = "ready_first"`` (docs/hardware-model.md, issue 41): each resident
program keeps its own in-order queue per engine, and a free engine starts the head op ready
earliest, so one program's dependency chain no longer blocks the others (head-of-line
blocking under ``in_order``). The two kernels of the issue (``kernbench.bench.
concurrency_kernels``), on ahbm-v2's fields with one policy or the other."""

from __future__ import annotations

import dataclasses

import pytest

import kernbench as kb
from kernbench.bench.concurrency_kernels import softmax_rows_case as softmax_case
from kernbench.bench.concurrency_kernels import tile_chain_case as chain_case
from kernbench.trace.hw import PRESETS


def _hw(arbitration: str, k: int) -> kb.HwConfig:
    return dataclasses.replace(PRESETS["ahbm-v2"], name=f"v2-{arbitration}-{k}",
                               engine_arbitration=arbitration, max_programs_per_pe=k)


def _latency(case: kb.Case, hw: kb.HwConfig, path) -> tuple[kb.Trace, dict]:
    trace = kb.record(case, path, hw=hw)
    return trace, kb.analyze.metrics(trace)


@pytest.mark.parametrize("factory", [chain_case, softmax_case], ids=["tl-loop", "softmax"])
def test_ready_first_with_32_resident_programs_is_three_times_faster_than_one(
        factory, tmp_path):
    _, one = _latency(factory(), _hw("ready_first", 1), tmp_path / "one.ktrace")
    trace, many = _latency(factory(), _hw("ready_first", 32), tmp_path / "many.ktrace")
    _, fifo = _latency(factory(), _hw("in_order", 32), tmp_path / "fifo.ktrace")
    assert trace.manifest["programs_per_pe"] > 1
    assert many["latency_ps"] * 3 <= one["latency_ps"], (many["latency_ps"], one["latency_ps"])
    assert many["latency_ps"] < fifo["latency_ps"]  # the head-of-line blocking is gone
    res = kb.replay(trace.path, case=factory, in_process=True)
    assert res.verified, res.verdict


def test_math_bound_softmax_reaches_half_its_math_roofline_under_ready_first(tmp_path):
    _, m = _latency(softmax_case(), _hw("ready_first", 32), tmp_path / "s.ktrace")
    assert m["bottleneck_engine"] == "math"
    assert m["efficiency"] >= 0.5, m["efficiency"]
