"""The pictures of why a kernel is slow on hardware with shared parts (ADR-0741, ADR-0742) and with
resident programs (issue 41): the by-line chart splits each line's time on the critical path
into its engines' work and its waits for each shared part and names the program a line
waited behind; the roofline draws the shared ceilings. Checked on the figure's artists."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from matplotlib.figure import Figure

import kernbench as kb
from kernbench.analyze.critical import path_of
from kernbench.analyze.frames import SHARED_SCHEMA
from kernbench.analyze.path_summary import summary
from kernbench.plot import data
from kernbench.plot.trace_figure import critical, draw_roofline, draw_wait, trace_figure
from kernbench.trace.hw import PRESETS
from tests.analyze.conftest import operand, restamp, write_shared
from tests.analyze.test_critical_path import ops_of

from .conftest import GOLDEN

PART_LEGENDS = ["engine work", "waiting for HBM", "waiting for TCM bandwidth",
                "waiting for a link", "waiting for issue"]


def _summary_with_every_part() -> dict:
    """Three exps the issue port delayed, a load that waited for HBM, an exp for TCM and a
    send for a link, one line each."""
    import polars as pl

    a, b = operand("tcm", 0, 64), operand("tcm", 64, 64)
    rows = [dict(name="exp", t=0, busy=5, ins=[], out=operand("tcm", 256, 64)),
            dict(name="dma_read", t=20, busy=100, end=620, ins=[operand("hbm", 0, 64)], out=a,
                 issue=20),
            dict(name="exp", t=620, busy=50, ins=[a], out=b, issue=20),
            dict(name="send", t=670, busy=200, end=1870, ins=[b],
                 out=operand("ipcq", 0, 64, pe=1), attrs='{"dir":"next","to":1}', issue=20)]
    waits = pl.DataFrame([(1, "issue", "issue.pe0", 20), (1, "hbm", "hbm.ch0", 40),
                          (2, "tcm", "tcm.pe0", 20), (3, "link", "link.pe0->pe1", 30)],
                         schema=SHARED_SCHEMA, orient="row")
    path = path_of(ops_of(rows), True, waits, issue_ps=20)
    return summary(path, 1870)


def test_by_line_chart_splits_each_line_into_engine_work_and_each_shared_part() -> None:
    s = _summary_with_every_part()
    assert all(r["path_ps"] for r in s["by_part"])  # every part has time on the path
    ax = Figure().add_subplot()
    draw_wait(ax, kb.Trace.open(GOLDEN / "gemm.ktrace"), s)  # with a summary: only that
    assert [t.get_text() for t in ax.get_legend().get_texts()] == PART_LEGENDS
    drawn: dict[float, float] = {}
    for bar in ax.patches:
        y = round(bar.get_y() + bar.get_height() / 2)
        drawn[y] = drawn.get(y, 0.0) + bar.get_width() * 1e6
    assert [round(drawn[y]) for y in sorted(drawn)] == [r["path_ps"] for r in s["by_line"]]


@pytest.fixture(scope="module", params=["in_order", "ready_first"])
def resident(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two programs resident on one PE, under either arbitration policy (issue 41)."""
    from kernbench.kernels.registry import build_case

    hw = dataclasses.replace(PRESETS["ahbm-v2"], n_pe=1, engine_queue_depth=2,
                             engine_arbitration=request.param)
    out = tmp_path_factory.mktemp("hol") / f"resident-{request.param}.ktrace"
    kb.record(build_case("scale-exp", {"rows": 2, "n": 512, "tile": 256}), out, hw=hw)
    return out


def test_by_line_chart_names_the_line_a_program_waited_behind(resident: Path) -> None:
    trace = kb.Trace.open(resident)
    m = kb.analyze.metrics(trace)
    _, s = critical(trace, m)
    assert s is not None and s["behind"]
    hol = s["behind"][0]
    ax = Figure().add_subplot()
    draw_wait(ax, trace, s)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    mine = [label for label in labels if label.startswith(f"{hol['src']} (")]
    ops = next(r["ops"] for r in s["by_line"] if r["src"] == hol["src"])
    assert mine == [f"{hol['src']} ({ops} ops; behind {hol['behind_src']} of 1 other program)"]
    assert ax.get_legend() is None  # no shared part: one kind of bar, no legend


def _shared_trace(tmp_path: Path) -> kb.Trace:
    """gqa-decode on hardware whose stack (16 GB/s) binds and whose TCM is priced, with a
    shared.parquet naming an HBM wait of a load the critical path runs through."""
    dst = tmp_path / "shared.ktrace"
    shutil.copytree(GOLDEN / "gqa-decode.ktrace", dst)
    hw = {**json.loads((dst / "manifest.json").read_text())["hw"], "hbm_total_gbps": 16,
          "tcm_gbps": 4096}
    restamp(dst, hw=hw)
    import polars as pl

    path = kb.analyze.critical_path(dst)
    covered = ((pl.col("engine") == "dma_rd") & (pl.col("t_from_ps") <= pl.col("t_start_ps"))
               & (pl.col("t_to_ps") >= pl.col("t_start_ps") + pl.col("busy_ps")))
    load = path.filter(covered).row(0, named=True)
    write_shared(dst, [(load["op_id"], "hbm", "hbm.ch2", min(load["busy_ps"], 500))])
    return kb.Trace.open(dst)


def test_roofline_draws_the_shared_ceilings_and_the_point_under_the_stack(tmp_path) -> None:
    trace = _shared_trace(tmp_path)
    m = kb.analyze.metrics(trace)
    assert m["efficiency_bound"] == "hbm_stack"
    ax = Figure().add_subplot()
    draw_roofline(ax, trace, m)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "hbm_stack (shared) (binds)" in labels and f"tcm pe{m['roofline_tcm_pe']}" in labels
    assert ax.get_title().startswith("roofline per engine and shared part")
    r = data.roofline(trace, m)
    stack = next(c for c in r.ceilings if c.name == "hbm_stack")
    point = next(line for line in ax.get_lines() if line.get_marker() == "o")
    (py,) = point.get_ydata()
    assert py == pytest.approx(m["efficiency"] * r.ceiling_at(stack, r.intensity), rel=1e-9)
    assert r.hbm_gbps == 16  # the machine's HBM is its stack


def test_trace_figure_with_shared_parts_renders_the_path_chart_with_its_parts(tmp_path) -> None:
    trace = _shared_trace(tmp_path)
    m = kb.analyze.metrics(trace)
    fig = trace_figure(trace, m, 1 << 20)
    texts = {t.get_text() for ax in fig.axes if ax.get_legend()
             for t in ax.get_legend().get_texts()}
    titles = [ax.get_title() for ax in fig.axes]
    assert any(t.startswith("on the critical path") for t in titles)
    assert fig.get_suptitle().endswith("bottleneck hbm_stack")  # what efficiency is against
    _, s = critical(trace, m)
    assert s is not None
    hbm = next(p["path_ps"] for p in s["by_part"] if p["part"] == "hbm")
    assert hbm > 0 and {"engine work", "waiting for HBM"} <= texts
