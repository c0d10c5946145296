"""What concurrency buys the attention kernels (issue 26, docs/hardware-model.md "What
concurrency buys"): figures of recorded traces, ahbm-v2 against ahbm-v1 on the same kernel,
never wall time."""

from __future__ import annotations

import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import critical_path, metrics
from kernbench.kernels.registry import build_case

#: the panel's causal prefill row: one GQA group (8 query heads, 1 KV head) on one PE
PREFILL_2K = {"S": 2048, "H_q": 8, "H_kv": 1}


@pytest.fixture(scope="module")
def prefill(tmp_path_factory) -> dict[str, kb.Trace]:
    """The causal prefill S=2048: serial on v1, serial and pipelined on v2."""
    out = tmp_path_factory.mktemp("prefill2k")
    runs = {"v1-serial": ("ahbm-v1", "serial"), "v2-serial": ("ahbm-v2", "serial"),
            "v2-pipelined": ("ahbm-v2", "pipelined")}
    return {key: kb.record(build_case("gqa-prefill", {**PREFILL_2K, "schedule": sched}),
                           out / f"{key}.ktrace", hw=hw)
            for key, (hw, sched) in runs.items()}


def _efficiency(trace: kb.Trace) -> float:
    return float(metrics(trace)["efficiency"])


def test_causal_prefill_2k_pipelined_on_v2_passes_0_90_and_serial_on_v2_lands_between(prefill):
    v1 = _efficiency(prefill["v1-serial"])
    v2_serial = _efficiency(prefill["v2-serial"])
    v2_piped = _efficiency(prefill["v2-pipelined"])
    # v1: every op blocks, so MATH / (MATH + GEMM + stores) caps the serial prefill
    assert v1 == pytest.approx(0.786, abs=0.002)
    assert v1 < v2_serial < 0.90 <= v2_piped
    # the MATH work is the same (the pipelined step swaps the acc add for one score copy,
    # plus one output copy per query tile): the gain is latency, not less work
    math = {k: metrics(t)["busy_max_ps_math"] for k, t in prefill.items()}
    assert math["v2-pipelined"] == pytest.approx(math["v1-serial"], rel=0.02)
    assert prefill["v2-pipelined"].t_end_ps < prefill["v2-serial"].t_end_ps < \
        prefill["v1-serial"].t_end_ps


def test_prefill_8k_flagship_share_of_one_pe_records_in_1_mib_and_passes_0_90_pipelined_on_v2(
        tmp_path):
    """The 8k flagship (Llama3-70B: 8 KV heads, 64 query heads) runs one GQA group per PE and
    its groups never meet, so one PE's share -- one group at S=8192 -- is the flagship's
    figure: 0.99996 here and for all 8 groups on 8 PEs (docs/hardware-model.md; 2.99 M ops,
    too long to record in the suite)."""
    trace = kb.record(build_case("gqa-prefill", {"S": 8192, "H_q": 8, "H_kv": 1,
                                                 "schedule": "pipelined"}),
                      tmp_path / "p.ktrace", hw="ahbm-v2")
    assert trace.ops["pe"].unique().to_list() == [0]
    assert trace.manifest["scratch_peak_bytes"] <= 1 << 20
    assert _efficiency(trace) >= 0.90


def _path_share(trace: kb.Trace) -> dict[str, float]:
    path = critical_path(trace)
    total = path["path_ps"].sum()
    by = path.group_by("engine").agg(pl.col("path_ps").sum())
    return {str(e): ps / total for e, ps in by.iter_rows()}


def test_critical_path_of_v1_prefill_runs_gemm_and_math_in_series_of_v2_pipelined_math(prefill):
    v1 = _path_share(prefill["v1-serial"])
    assert v1["math"] > 0.6 and v1["gemm"] > 0.1  # both on the path, one after the other
    v2 = _path_share(prefill["v2-pipelined"])
    assert v2["math"] > 0.95 and v2.get("gemm", 0.0) < 0.01  # the GEMMs run under the softmax


def test_decode_4k_is_the_dma_stream_plus_one_latency_and_its_tail_on_both_presets(tmp_path):
    """Decode streams K/V tiles back to back on the DMA read engine under v1 already, so v2
    buys nothing: the latency is the roofline (every byte at full bandwidth) plus the last
    read's latency to visibility plus what follows it (the last tile's softmax and the
    store). At 4k that is 0.9226; the same closed form gives 0.9896 at 32k (measured so on
    both presets): the issue's "stays >= 0.99" was never true of this kernel."""
    results = {}
    for hw in ("ahbm-v1", "ahbm-v2"):
        trace = kb.record(build_case("gqa-decode", {"S_kv": 4096}), tmp_path / f"{hw}.ktrace",
                          hw=hw)
        m = metrics(trace)
        reads = trace.ops.filter((pl.col("pe") == 0) & (pl.col("name") == "dma_read")
                                 ).sort("t_start_ps")
        hw_cfg = trace.manifest["hw"]
        transfer = (reads["nbytes"] * 1000 / hw_cfg["hbm_gbps"]).cast(pl.Int64)  # ps
        # back to back: each read starts the moment the one before it has moved its bytes
        gaps = reads["t_start_ps"].diff().drop_nulls() - transfer.head(reads.height - 1)
        assert (gaps == 0).all()
        last_end = int(reads["t_end_ps"].max())
        tail = trace.t_end_ps - last_end
        latency_ps = hw_cfg["dma_latency_ns"] * 1000
        assert trace.t_end_ps == m["roofline_ps_dma_rd"] + latency_ps + tail
        results[hw] = (trace.t_end_ps, float(m["efficiency"]))
    assert results["ahbm-v1"] == results["ahbm-v2"]
    assert results["ahbm-v2"][1] == pytest.approx(0.9226, abs=1e-4)
