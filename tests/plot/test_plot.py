"""kernbench plot: the picture of a trace and of a sweep, its data, its bad input."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from matplotlib.image import imread

import kernbench as kb
from kernbench.cli import main
from kernbench.plot import data
from kernbench.plot.sweep_figure import load_points, pareto_front
from kernbench.plot.trace_figure import COLOURS

from .conftest import GOLDEN

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pixels_of(png: Path, colour: str) -> int:
    """How many pixels of ``png`` have exactly ``colour`` (#rrggbb)."""
    img = imread(png)[..., :3]
    want = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return int(np.all(np.abs(img - want) < 1e-3, axis=-1).sum())


def test_plot_of_a_trace_draws_every_engine_it_used(tmp_path):
    out = tmp_path / "gqa.png"
    result = CliRunner().invoke(main, ["plot", str(GOLDEN / "gqa-decode.ktrace"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote the trace picture" in result.output
    assert out.read_bytes()[:8] == PNG_MAGIC
    height, width = imread(out).shape[:2]
    assert width >= 1000 and height >= 800
    for engine in ("dma_rd", "gemm", "math", "stall"):  # the engines gqa-decode keeps busy
        assert _pixels_of(out, COLOURS[engine]) > 200, engine
    assert _pixels_of(out, COLOURS["link_tx"]) == 0  # decode sends nothing over the ring


def test_plot_of_a_ring_trace_shows_the_link_rows(tmp_path):
    out = tmp_path / "ring.png"
    kb.plot.plot(GOLDEN / "ring-prefill.ktrace", out)
    assert _pixels_of(out, COLOURS["link_tx"]) > 200


def test_svg_picture_is_xml_and_deterministic(tmp_path):
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    for out in (a, b):
        result = CliRunner().invoke(main, ["plot", str(GOLDEN / "gemm.ktrace"), "-o", str(out)])
        assert result.exit_code == 0, result.output
    root = ET.fromstring(a.read_bytes())
    assert root.tag.endswith("svg")
    assert a.read_bytes() == b.read_bytes()


def test_timeline_spans_add_up_to_the_engine_busy_metrics():
    trace = kb.Trace.open(GOLDEN / "ring-prefill.ktrace")
    m = kb.analyze.metrics(trace)
    spans = data.engine_spans(trace)
    for engine in ("dma_rd", "dma_wr", "gemm", "math", "link_tx"):
        busy = spans.filter(pl.col("engine") == engine).select(pl.col("t1") - pl.col("t0")).sum()
        assert int(busy.item() or 0) == m[f"busy_ps_{engine}"], engine


def test_timeline_of_many_spans_is_reduced_but_covers_the_same_time():
    trace = kb.Trace.open(GOLDEN / "small-ops.ktrace")
    full, reduced = data.engine_spans(trace), data.engine_spans(trace, bins=20)
    math_full = full.filter(pl.col("engine") == "math")
    math_red = reduced.filter(pl.col("engine") == "math")
    assert math_full.height >= 100 and math_red.height <= 21
    assert math_red["t0"].min() == math_full["t0"].min()
    assert math_red["t1"].max() == math_full["t1"].max()


def test_wait_by_line_sums_to_the_stall_metric_and_scratch_peak_survives():
    trace = kb.Trace.open(GOLDEN / "gqa-decode.ktrace")
    m = kb.analyze.metrics(trace)
    per = data.wait_by_line(trace)
    assert int(per["wait_ps"].sum()) == m["stall_ps"] > 0
    assert all(":" in s for s in per["src"].to_list())  # file:line of the kernel
    assert int(data.scratch_steps(trace, bins=7)["bytes"].max()) == m["scratch_peak_bytes"]
    assert int(data.stall_spans(trace).select(pl.col("t1") - pl.col("t0")).sum().item()) \
        == m["stall_ps"]


def test_wait_by_line_folds_the_tail_into_other_lines():
    trace = kb.Trace.open(GOLDEN / "v2" / "gqa-decode.ktrace")  # eight lines waited
    waits: dict[str, list[int]] = {}  # counted here from the op rows, apart from polars
    for r in trace.ops.iter_rows(named=True):
        if r["parent"] is None and r["wait_ps"] > 0:
            waits.setdefault(r["src"], []).append(r["wait_ps"])
    assert len(waits) == 8
    ranked = sorted(waits.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    rest = ranked[2:]
    assert data.wait_by_line(trace, top=2).rows() == [
        *((src, sum(w), len(w)) for src, w in ranked[:2]),
        ("(other lines)", sum(sum(w) for _, w in rest), sum(len(w) for _, w in rest))]
    assert data.wait_by_line(trace, top=8).rows() == [(s, sum(w), len(w)) for s, w in ranked]


def test_roofline_point_is_flops_over_bytes_and_flops_over_latency():
    trace = kb.Trace.open(GOLDEN / "gemm.ktrace")
    m = kb.analyze.metrics(trace)
    r = data.roofline(trace, m)
    hw = trace.manifest["hw"]
    moved = m["dma_read_bytes"] + m["dma_write_bytes"]
    assert r.intensity == pytest.approx(m["flops"] / moved, rel=1e-12)
    assert r.achieved_gflops == pytest.approx(m["flops"] / (m["latency_ps"] / 1000), rel=1e-12)
    n = m["n_pe_used"]
    assert r.peak_gflops == 2 * hw["gemm_rows"] * hw["gemm_cols"] * hw["clock_ghz"] * n
    assert r.hbm_gbps == hw["hbm_gbps"] * n
    assert r.achieved_gflops <= min(r.peak_gflops, r.intensity * r.hbm_gbps)  # under its roof


def test_plot_of_a_sweep_draws_its_charts(tmp_path, sweep_dir):
    out = tmp_path / "sweep.png"
    result = CliRunner().invoke(main, ["plot", str(sweep_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "sweep picture" in result.output
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert _pixels_of(out, "#d62728") > 50  # the Pareto front line


def test_sweep_points_keep_ok_rows_and_the_swept_parameters(sweep_dir):
    points, params = load_points(sweep_dir)
    assert params == ["n", "tile"]
    assert points.height == 6 and set(points["status"]) == {"ok"}


def test_pareto_front_is_the_set_no_point_dominates(sweep_dir):
    points, _ = load_points(sweep_dir)
    front = pareto_front(points, "latency_ps", "scratch_peak_bytes")
    rows = points.select("point_id", "latency_ps", "scratch_peak_bytes").rows()

    def dominated(p):
        return any(q[1] <= p[1] and q[2] <= p[2] and (q[1], q[2]) != (p[1], p[2]) for q in rows)

    brute = {p[0] for p in rows if not dominated(p)}
    # equal points: the front keeps one of each tie
    assert set(front["point_id"]) <= brute
    assert {(p[1], p[2]) for p in rows if p[0] in brute} == \
        set(front.select("latency_ps", "scratch_peak_bytes").rows())


def test_pareto_front_of_a_hand_made_table():
    pts = pl.DataFrame({"x": [1, 2, 3, 4, 2], "y": [9, 5, 6, 1, 4]})
    assert pareto_front(pts, "x", "y").rows() == [(1, 9), (2, 4), (4, 1)]


@pytest.mark.parametrize("suffix", [".gif", ".json", ""])
def test_plot_to_an_unknown_format_is_bad_input(tmp_path, suffix):
    out = tmp_path / f"pic{suffix}"
    result = CliRunner().invoke(main, ["plot", str(GOLDEN / "gemm.ktrace"), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert not out.exists()


def test_plot_of_a_missing_trace_is_bad_input(tmp_path):
    result = CliRunner().invoke(main, ["plot", str(tmp_path / "nope"), "-o",
                                       str(tmp_path / "x.png")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert not (tmp_path / "x.png").exists()


def test_sweep_with_a_corrupt_points_table_is_bad_input(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "sweep.toml").write_text('case = "scale-exp"\n')
    (tmp_path / "s" / "points.parquet").write_bytes(b"not parquet")
    result = CliRunner().invoke(main, ["plot", str(tmp_path / "s"), "-o",
                                       str(tmp_path / "x.png")])
    assert result.exit_code == 2 and "points.parquet" in result.output


def test_png_bytes_are_a_png():
    from matplotlib.figure import Figure

    from kernbench.plot import png_bytes

    fig = Figure()
    fig.add_subplot().plot([0, 1])
    assert imread(io.BytesIO(png_bytes(fig))).shape[2] in (3, 4)
