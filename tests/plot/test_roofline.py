"""The roofline of a trace: one ceiling per engine, the point under the one that binds, at the
efficiency ``kernbench report`` prints (checked on the figure's data, not its pixels)."""

from __future__ import annotations

import polars as pl
import pytest
from matplotlib.figure import Figure

import kernbench as kb
from kernbench.analyze.metrics import ceilings
from kernbench.plot import data
from kernbench.plot.trace_figure import draw_roofline

from .conftest import GOLDEN


def _drawn(trace: kb.Trace, m: dict) -> dict[str, tuple[list[float], list[float]]]:
    ax = Figure().add_subplot()
    draw_roofline(ax, trace, m)
    return {str(line.get_label()) if line.get_marker() != "o" else "point":
            (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


def test_roofline_has_four_ceilings_and_the_binding_one_is_roofline_bound():
    trace = kb.Trace.open(GOLDEN / "gqa-prefill.ktrace")
    m = kb.analyze.metrics(trace)
    cs = ceilings(m)
    assert [c.name for c in cs] == ["hbm", "gemm", "math", "link"]
    assert [c.name for c in cs if c.binds] == ["math"] and m["roofline_bound"] == "math"
    binding = next(c for c in cs if c.binds)
    assert binding.gflops == min(c.gflops for c in cs)  # the lowest roof binds
    assert cs[3].gflops == float("inf")  # no link traffic: no link roof
    assert binding.gflops == pytest.approx(m["flops"] / m["busy_max_ps_math"] * 1000, rel=1e-12)


def test_math_bound_point_sits_at_efficiency_times_the_math_ceiling_in_the_figure():
    trace = kb.Trace.open(GOLDEN / "gqa-prefill.ktrace")
    m = kb.analyze.metrics(trace)
    lines = _drawn(trace, m)
    assert {"hbm", "gemm", "math (binds)"} <= set(lines)  # link did no work: not drawn
    (px,), (py,) = lines["point"]
    math_y = lines["math (binds)"][1][0]  # a flat roof: its height anywhere
    assert py == pytest.approx(m["efficiency"] * math_y, rel=1e-12)
    assert px == pytest.approx(m["flops"] / (m["dma_read_bytes"] + m["dma_write_bytes"]))
    assert py < math_y < min(lines["gemm"][1][0], data.roofline(trace, m).peak_gflops)


def test_hbm_bound_point_sits_on_the_diagonal_at_efficiency_of_it():
    trace = kb.Trace.open(GOLDEN / "gqa-decode.ktrace")
    m = kb.analyze.metrics(trace)
    assert m["roofline_bound"] == "dma_rd"
    r = data.roofline(trace, m)
    hbm = r.bound
    assert hbm is not None and hbm.name == "hbm"
    lines = _drawn(trace, m)
    xs, ys = lines["hbm (binds)"]
    assert ys[-1] / ys[0] == pytest.approx(xs[-1] / xs[0])  # slope 1 on log-log: bandwidth
    assert r.ceiling_at(hbm, r.intensity) == pytest.approx(hbm.gflops, rel=1e-12)
    (py,) = lines["point"][1]
    # contiguous loads: the read channel's busy time is its ideal time up to rounding
    assert py == pytest.approx(m["efficiency"] * hbm.gflops, rel=1e-6)
    assert m["roofline_frac"] == pytest.approx(m["efficiency"], rel=1e-6)


def test_roofline_places_a_math_only_kernel_by_its_element_results():
    """stream-sum does no GEMM flop: its point counts the MATH engine's element results per
    HBM byte, under the MATH ceiling at its efficiency."""
    trace = kb.Trace.open(GOLDEN / "stream-sum.ktrace")
    m = kb.analyze.metrics(trace)
    assert m["flops"] == 0 and m["roofline_bound"] == "math"
    ops = trace.ops.filter((pl.col("engine") == "math") & (pl.col("kind") != "composite"))
    results = int(ops["num_elements"].sum())
    moved = m["dma_read_bytes"] + m["dma_write_bytes"]
    r = data.roofline(trace, m)
    assert r.unit == "element result"
    assert r.intensity == pytest.approx(results / moved, rel=1e-12)
    assert r.achieved_gflops == pytest.approx(results / (m["latency_ps"] / 1000), rel=1e-12)
    lines = _drawn(trace, m)
    (px,), (py,) = lines["point"]
    assert px == pytest.approx(r.intensity)
    assert py == pytest.approx(m["efficiency"] * lines["math (binds)"][1][0], rel=1e-12)
    assert "machine GEMM peak" not in lines  # a flop roof does not apply


def test_roofline_places_a_copy_kernel_by_its_bytes(tmp_path):
    """A kernel with neither GEMM nor MATH work is placed by the bytes it moves: its point
    is its achieved HBM GB/s at intensity 1."""
    import numpy as np

    from kernbench import tl

    @kb.kernel
    def copy(x, y, *, n: int):
        tl.store(y, tl.load(x, (n,), tl.float32))

    case = kb.Case(name="copy", kernel=copy, grid=(1,),
                   tensors={"x": kb.tensor((256,), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((256,), "float32", role="output")},
                   params={"n": 256}, reference=lambda x: {"y": np.array(x)})
    trace = kb.record(case, tmp_path / "copy.ktrace")
    m = kb.analyze.metrics(trace)
    r = data.roofline(trace, m)
    moved = m["dma_read_bytes"] + m["dma_write_bytes"]
    assert r.unit == "byte" and r.intensity == 1.0
    assert r.achieved_gflops == pytest.approx(moved / (m["latency_ps"] / 1000), rel=1e-12)
    assert "point" in _drawn(trace, m)
