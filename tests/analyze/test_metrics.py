"""The metrics of docs/analysis.md against hand-computable traces and independent recomputation."""

from __future__ import annotations

import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import metrics
from kernbench.analyze.metrics import ENGINES, resolve_metric
from kernbench.errors import TraceFormatError


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _intersection(xs: list[tuple[int, int]], ys: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


def test_gemm_metrics_by_hand(traces) -> None:
    # gemm M=256 N=256 K=256 BM=BN=128: 2 programs on PEs 0 and 1; each loads its A block
    # [128, 256] and 2 Bt blocks [128, 256] (bf16, 64 KiB each), stores 2 f32 C tiles
    path = traces("gemm", N=256)
    m = metrics(path)
    trace = kb.Trace.open(path)
    assert m["latency_ps"] == trace.t_end_ps
    assert (m["dma_read_count"], m["dma_write_count"]) == (6, 4)
    assert (m["dma_read_bytes"], m["dma_write_bytes"]) == (6 * 65536, 4 * 65536)
    assert m["flops"] == 4 * 2 * 128 * 128 * 256
    # a read moves 64 KiB at 128 GB/s = 512 ns; three reads per PE back to back
    assert m["busy_max_ps_dma_rd"] == 3 * 512_000
    assert m["busy_ps_dma_rd"] == 6 * 512_000
    assert m["roofline_ps_dma_rd"] == pytest.approx(3 * 65536 * 1000 / 128)
    # GEMM: ceil(128/128) * ceil(128/128) * 256 + 32 cycles per dot, two dots per PE
    assert m["busy_max_ps_gemm"] == 2 * 288_000
    assert m["max_engine_busy_ps"] == 3 * 512_000
    assert m["bottleneck_engine"] == "dma_rd" and m["roofline_bound"] == "dma_rd"
    assert m["efficiency"] == pytest.approx(3 * 512_000 / m["latency_ps"])
    assert m["util_dma_rd"] == pytest.approx(m["efficiency"])
    assert m["hbm_gbps_achieved"] == pytest.approx(10 * 65536 * 1000 / m["latency_ps"])
    assert m["scratch_peak_bytes"] == trace.manifest["scratch_peak_bytes"]
    assert m["scratch_peak_bytes_pe0"] == m["scratch_peak_bytes"]
    assert m["scratch_peak_bytes_pe2"] == 0


def test_stall_and_overlap_match_a_recomputation(traces) -> None:
    path = traces("gemm", BN=64)
    m = metrics(path)
    ops = kb.Trace.open(path).ops.with_columns(pl.col("engine").cast(pl.String))
    assert m["stall_ps"] == ops.filter(pl.col("parent").is_null())["wait_ps"].sum()
    overlap = dma_total = 0
    for pe in ops["pe"].unique().to_list():
        mine = ops.filter((pl.col("pe") == pe) & (pl.col("busy_ps") > 0))

        def spans(engines: set[str], frame: pl.DataFrame = mine) -> list[tuple[int, int]]:
            sel = frame.filter(pl.col("engine").is_in(list(engines)))
            return _union([(a, a + b) for a, b in zip(sel["t_start_ps"], sel["busy_ps"],
                                                      strict=True)])

        dma, cmp = spans({"dma_rd", "dma_wr"}), spans({"gemm", "math"})
        overlap += _intersection(dma, cmp)
        dma_total += sum(b - a for a, b in dma)
    assert overlap > 0  # the prefetching gemm overlaps loads with dots
    assert m["dma_compute_overlap_ps"] == overlap
    assert m["dma_active_ps"] == dma_total
    assert m["dma_compute_overlap_frac"] == pytest.approx(overlap / dma_total)


def test_flat_dict_of_scalars_with_every_engine(traces) -> None:
    m = metrics(kb.Trace.open(traces("softmax")))
    assert all(isinstance(k, str) and isinstance(v, int | float | str) for k, v in m.items())
    for e in ENGINES:
        assert {f"busy_ps_{e}", f"util_{e}", f"roofline_ps_{e}"} <= set(m)
    assert m["busy_ps_gemm"] == 0 and m["busy_ps_math"] > 0
    assert m["roofline_bound"] in {str(e) for e in ENGINES}


def test_per_pe_view(traces) -> None:
    path = traces("softmax")
    whole, pe1 = metrics(path), metrics(path, pe=1)
    assert pe1["n_pe_used"] == 1
    assert pe1["dma_read_count"] * 8 == whole["dma_read_count"]  # 8 programs on 8 PEs
    assert pe1["latency_ps"] <= whole["latency_ps"]
    assert "scratch_peak_bytes_pe1" not in pe1


def test_resolve_metric_aliases_and_errors() -> None:
    keys = {"latency_ps": 1, "stall_ps": 2}
    assert resolve_metric("latency", keys) == "latency_ps"
    assert resolve_metric("stall_ps", keys) == "stall_ps"
    with pytest.raises(KeyError, match="unknown metric 'latenc'; did you mean 'latency_ps'"
                                       r"\?; similar: latency_ps"):
        resolve_metric("latenc", keys)


def test_metric_names_did_you_mean():
    keys = {"latency_ps": 1, "stall_ps": 2, "dma_read_bytes": 3}
    with pytest.raises(KeyError, match=r"unknown metric 'latncy'; did you mean 'latency_ps'\?"):
        resolve_metric("latncy", keys)  # the alias "latency" is close: its key is named
    with pytest.raises(KeyError, match=r"did you mean 'dma_read_bytes'\?"):
        resolve_metric("dma_reed_bytes", keys)
    with pytest.raises(KeyError, match=r"unknown metric 'zzz'; known: "):
        resolve_metric("zzz", keys)


def test_not_a_trace(tmp_path) -> None:
    with pytest.raises(TraceFormatError, match="no manifest.json"):
        metrics(tmp_path)


def test_composite_children_count_and_parents_do_not(traces, edit_trace) -> None:
    from .conftest import composite_ops

    ops = composite_ops()
    path = edit_trace(traces("scale-exp"), lambda df: ops, n_ops=ops.height,
                      t_end_ps=int(ops["t_end_ps"].max()), scratch_peak_bytes=0)
    m = metrics(path)
    assert m["dma_read_count"] == 3 and m["dma_read_bytes"] == 3 * 64
    assert m["flops"] == 200  # the two child dots, not the parent
    assert m["stall_ps"] == 2 * 5  # the parent and the exp; children are the scheduler's
    assert m["busy_ps_gemm"] == 100 and m["busy_max_ps_gemm"] == 100


def test_pe_busy_balance_is_the_busiest_pe_compute_over_the_mean(traces, edit_trace) -> None:
    # gemm N=256: two programs, each two dots of 288 ns on its own PE and no MATH op
    path = traces("gemm", N=256)
    assert metrics(path)["pe_busy_balance"] == 1.0

    def slower_pe1(df: pl.DataFrame) -> pl.DataFrame:  # PE 1's dots take twice as long
        dot = (pl.col("pe") == 1) & (pl.col("engine").cast(pl.String) == "gemm")
        return df.with_columns(busy_ps=pl.when(dot).then(pl.col("busy_ps") * 2)
                               .otherwise(pl.col("busy_ps")))

    m = metrics(edit_trace(path, slower_pe1))
    assert m["pe_busy_balance"] == pytest.approx((4 * 288) / ((2 * 288 + 4 * 288) / 2))
