"""The roofline of a trace: one ceiling per engine, the point under the one that binds, at the
efficiency ``kernbench report`` prints (checked on the figure's data, not its pixels)."""

from __future__ import annotations

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


def test_roofline_of_a_trace_without_flops_places_no_point():
    trace = kb.Trace.open(GOLDEN / "stream-sum.ktrace")
    m = kb.analyze.metrics(trace)
    assert m["flops"] == 0
    assert "point" not in _drawn(trace, m)
