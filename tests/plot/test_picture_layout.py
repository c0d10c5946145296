"""Every picture is rendered and its layout measured with matplotlib's own renderer: nothing
drawn outside the figure, no legend over a line, bar or span of any chart, the preset named
in the title (issue 42: clipped roofline title, sweep legends over the lines, a cut Pareto
label, stall lanes and scratch curves stopping half-way under ahbm-v2, absolute source paths,
the access picture of a 1-D tensor a one-pixel strip with a 1,024-colour legend)."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.path import Path as MplPath

import kernbench as kb
from kernbench import tl
from kernbench.analyze.frames import hw_of
from kernbench.plot import data
from kernbench.plot.access_figure import _draw_owners, _draw_touches, access_figure, fold
from kernbench.plot.panel_figure import panel_figure
from kernbench.plot.sweep_figure import sweep_figure
from kernbench.plot.trace_figure import panels, trace_figure

from .conftest import GOLDEN


def layout_problems(fig: Figure) -> list[str]:
    """What a reader would see cut or covered: the drawn extent past the figure's edges, or a
    legend's box crossing a line, bar, span or marker of any chart of the figure."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    problems = []
    tight = fig.get_tightbbox(renderer)  # inches
    w, h = fig.get_size_inches()
    if tight.x0 < -0.01 or tight.y0 < -0.01 or tight.x1 > w + 0.01 or tight.y1 > h + 0.01:
        problems.append(f"drawn past the figure: {tight.bounds} in a {w} x {h} figure")
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        for other in fig.axes:
            for line in other.get_lines():
                xy = line.get_transform().transform(line.get_xydata())
                if len(xy) and MplPath(xy).intersects_bbox(box, filled=False):
                    problems.append(f"legend of {ax.get_title()!r} over {line.get_label()!r}")
            for coll in other.collections:
                offsets = coll.get_offsets()
                if isinstance(coll, PathCollection) and len(offsets):  # markers: their points
                    at = coll.get_offset_transform().transform(offsets)
                    hit = any(box.contains(x, y) for x, y in at)
                else:  # spans and line segments: their outlines
                    hit = any(p.transformed(coll.get_transform()).intersects_bbox(box)
                              for p in coll.get_paths())
                if hit:
                    problems.append(f"legend of {ax.get_title()!r} over {type(coll).__name__}")
            for patch in other.patches:
                if patch.get_window_extent(renderer).overlaps(box):
                    problems.append(f"legend of {ax.get_title()!r} over a bar")
    return problems


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, kb.Trace]:
    """The README's tiled matmul shape on both presets, recorded from a module imported from
    a folder the working directory is not in (its source lines are absolute paths)."""
    folder = tmp_path_factory.mktemp("project") / "kernels"
    folder.mkdir()
    (folder / "mykern.py").write_text(KERNEL)
    sys.path.insert(0, str(folder))
    try:
        import mykern  # type: ignore[import-not-found]

        out = {hw: kb.record(mykern.case(), folder.parent / f"{hw}.ktrace", hw=hw)
               for hw in ("ahbm-v1", "ahbm-v2")}
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("mykern", None)
    return out


KERNEL = '''
import numpy as np
import kernbench as kb
from kernbench import tl

@kb.kernel
def mm(a, bt, c, *, N: int, K: int, BN: int):
    i = tl.program_id(0)
    x = tl.load(a + i * 128 * K, (128, K), tl.bfloat16)
    for j in range(N // BN):
        w = tl.load(bt + j * BN * K, (BN, K), tl.bfloat16)
        with tl.scratch_scope():
            tl.store(c + (i * (N // BN) + j) * 128 * BN, tl.dot(x, tl.trans(w)))

def case():
    return kb.Case(name="mm", kernel=mm, grid=(2,),
                   tensors={"a": kb.tensor((256, 128), "bfloat16", init=kb.randn(seed=1)),
                            "bt": kb.tensor((512, 128), "bfloat16", init=kb.randn(seed=2)),
                            "c": kb.tensor((2, 4, 128, 128), "float32", role="output")},
                   params={"N": 512, "K": 128, "BN": 128})
'''


@pytest.mark.parametrize("hw", ["ahbm-v1", "ahbm-v2"])
def test_trace_picture_fits_its_figure_and_no_legend_covers_data(traces, hw):
    trace = traces[hw]
    m = kb.analyze.metrics(trace)
    fig = trace_figure(trace, m, hw_of(trace).kernel_scratch_bytes)
    assert layout_problems(fig) == []
    assert f" on {hw} " in fig.get_suptitle()  # which preset drew it
    for name, part in panels(trace, m, hw_of(trace).kernel_scratch_bytes).items():
        assert layout_problems(part) == [], name


def test_roofline_title_is_not_clipped_in_the_golden_gqa_picture():
    trace = kb.Trace(GOLDEN / "gqa-decode.ktrace")
    fig = trace_figure(trace, kb.analyze.metrics(trace), hw_of(trace).kernel_scratch_bytes)
    assert layout_problems(fig) == []
    roof = next(ax for ax in fig.axes if ax.get_title().startswith("roofline"))
    assert "\n" in roof.get_title()  # two lines: narrower than its chart


def test_stall_lanes_and_scratch_curve_cover_the_whole_recording(traces):
    """Under ahbm-v2 the kernel issues everything by about half the latency: the stall row
    goes on (hatched) and the scratch curve holds to each PE's last op, not stopping there."""
    trace = traces["ahbm-v2"]
    ends = trace.ops.group_by("pe").agg(pl.col("t_end_ps").max()).sort("pe")
    drains = data.drain_spans(trace)
    assert drains["pe"].to_list() == ends["pe"].to_list()
    assert drains["t1"].to_list() == ends["t_end_ps"].to_list()
    assert max(drains["t1"]) == trace.t_end_ps
    assert (drains["t0"] < drains["t1"] // 2 + drains["t1"]).all()
    steps = data.scratch_steps(trace)
    last = steps.group_by("pe").agg(pl.col("t").max()).sort("pe")
    assert last["t"].to_list() == ends["t_end_ps"].to_list()
    assert data.drain_spans(traces["ahbm-v1"]).height == 0  # blocking: nothing left to run


def test_source_labels_are_relative_to_the_kernel_module(traces):
    trace = traces["ahbm-v2"]
    srcs = trace.ops["src"].cast(str).unique().to_list()
    assert all(s.startswith("/") for s in srcs)  # the trace keeps what it recorded
    label = data.src_labels(trace)
    assert sorted({label(s).split(":")[0] for s in srcs}) == ["mykern.py"]
    fig = trace_figure(trace, kb.analyze.metrics(trace), 1 << 20)
    chart = next(ax for ax in fig.axes if "source line" in ax.get_title())
    ticks = [t.get_text() for t in chart.get_yticklabels()]
    assert ticks and all(t.startswith("mykern.py:") for t in ticks), ticks


def test_sweep_picture_legends_clear_of_lines_and_pareto_labels_inside(sweep_dir):
    fig = sweep_figure(sweep_dir)
    assert layout_problems(fig) == []
    assert "ahbm-v1" in fig.get_suptitle()  # the suite records on ahbm-v1 (tests/conftest.py)
    pareto = next(ax for ax in fig.axes if ax.get_title().startswith("Pareto"))
    renderer = fig.canvas.get_renderer()
    inside = pareto.get_window_extent(renderer)
    for note in pareto.texts:
        box = note.get_window_extent(renderer)
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1, note.get_text()


def test_panel_picture_fits_and_names_both_presets():
    rows = [{"config": f"row {i}", "hw": hw, "latency_us": 10.0 + i, "efficiency": e,
             "roofline_bound": "math"}
            for hw, e in (("ahbm-v2", 0.9), ("ahbm-v1", 0.5)) for i in range(3)]
    fig = panel_figure(pl.DataFrame(rows))
    assert layout_problems(fig) == []
    assert "on ahbm-v2 (outlined: ahbm-v1)" in fig.get_suptitle()


def test_access_picture_folds_a_1d_tensor_into_a_near_square_grid(tmp_path):
    n, block = 1 << 16, 64  # 1,024 programs, each a block of 64 elements

    @kb.kernel
    def double(x, y, *, B: int):
        p = tl.program_id(0)
        tl.store(y + p * B, tl.load(x + p * B, (B,), tl.float32) * 2.0)

    case = kb.Case(name="double", kernel=double, grid=(n // block,),
                   tensors={"x": kb.tensor((n,), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((n,), "float32", role="output")},
                   params={"B": block})
    trace = kb.record(case, tmp_path / "d.ktrace")
    fig = access_figure(trace, "x")
    assert layout_problems(fig) == []
    owners = fig.axes[0].images[0].get_array()
    assert owners.shape == (256, 256) == fold(1, n)
    # a program owns a contiguous block: 64 elements, a quarter of a grid row
    np.testing.assert_array_equal(owners[0, :128], np.repeat([0, 1], 64))
    program_bar = fig.axes[3]
    lo, hi = program_bar.get_ylim()
    ticks = [v for v in program_bar.get_yticks() if lo <= v <= hi]
    assert 3 <= len(ticks) <= 7 and all(float(v).is_integer() for v in ticks)
    assert "of 1024" in program_bar.get_ylabel()
    touches_bar = fig.axes[5]
    assert list(touches_bar.get_yticks()) == [1]  # one read each: one tick, not 0.90 .. 1.10
    assert "x of double on ahbm-v1" in fig.get_suptitle() and "folded 256 wide" in (
        fig.get_suptitle())


@pytest.mark.parametrize("programs", [10**3, 10**4, 10**5])
def test_program_legend_stays_readable_from_a_thousand_to_a_hundred_thousand(programs):
    side = 512
    owners = np.ma.masked_invalid((np.arange(side * side) * programs // (side * side))
                                  .reshape(side, side).astype(float))
    fig = Figure(figsize=(5, 4), layout="constrained")
    ax = fig.add_subplot()
    _draw_owners(fig, ax, owners)
    assert layout_problems(fig) == []
    bar = fig.axes[1]
    values = [v for v in bar.get_yticks() if 0 <= v <= programs - 1]
    assert 3 <= len(values) <= 7 and all(float(v).is_integer() for v in values)


def test_a_constant_touch_count_has_one_integer_tick():
    fig = Figure()
    _draw_touches(fig, fig.add_subplot(), np.ma.masked_equal(np.full((4, 4), 3), 0))
    assert list(fig.axes[1].get_yticks()) == [3]
