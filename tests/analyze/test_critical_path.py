"""The critical path (docs/analysis.md): hand-built op logs whose path is known edge by edge, a v1
recording whose path is its serial chain and agrees with the wait-by-line picture, and the
path in ``report``, ``report --json`` and the pictures (checked on the figure's data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

import kernbench as kb
from kernbench.analyze import critical_path, report
from kernbench.analyze.critical import EDGES, path_of, summary
from kernbench.analyze.frames import hw_of, load_ops
from kernbench.plot import data
from kernbench.plot.trace_figure import PATH_LABEL, critical, draw_timeline, draw_wait

from .conftest import fake_ops, operand


def ops_of(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """``fake_ops`` plus per-row ``issue`` (t_issue_ps), ``wait`` and ``program``."""
    df = fake_ops(rows)
    return df.with_columns(
        t_issue_ps=pl.Series([r.get("issue", r["t"]) for r in rows], dtype=pl.Int64),
        wait_ps=pl.Series([r.get("wait", 0) for r in rows], dtype=pl.Int64),
        program=pl.Series([r.get("program", r.get("pe", 0)) for r in rows], dtype=pl.Int32))


def chain(path: pl.DataFrame) -> list[tuple[int, str, int, int]]:
    return list(path.select("op_id", "edge", "t_from_ps", "t_to_ps").iter_rows())


def exp(t: int, busy: int, src: int, dst: int, **kw: Any) -> dict[str, Any]:
    return dict(name="exp", t=t, busy=busy, ins=[operand("tcm", src, 64)],
                out=operand("tcm", dst, 64), **kw)


def load(t: int, end: int, dst: int, **kw: Any) -> dict[str, Any]:
    return dict(name="dma_read", t=t, busy=10, end=end, ins=[operand("hbm", 4096, 64)],
                out=operand("tcm", dst, 64), **kw)


def test_an_op_started_by_its_input_landing_is_bound_by_a_data_edge() -> None:
    # the exp is issued at 0 (async) and starts when the load lands at 500
    path = path_of(ops_of([load(0, 500, 0), exp(500, 20, 0, 64, issue=0)]), True)
    assert chain(path) == [(0, "start", 0, 500), (1, "data", 500, 520)]
    assert path["path_ps"].to_list() == [500, 20]


def test_an_op_started_when_its_engine_freed_is_bound_by_an_engine_edge() -> None:
    # two independent exps issued at 0: the second waits for the MATH engine only
    path = path_of(ops_of([exp(0, 100, 0, 64), exp(100, 50, 128, 192, issue=0)]), True)
    assert chain(path) == [(0, "start", 0, 100), (1, "engine", 100, 150)]


def test_a_kernel_stalled_on_a_full_queue_is_bound_by_a_queue_edge() -> None:
    # MATH queue of one: op 2's issue waits until op 1 leaves the queue (starts at 100);
    # the load issued right after it then ends last
    rows = [exp(0, 100, 0, 64), exp(100, 50, 128, 192, issue=0),
            exp(150, 50, 256, 320, issue=100, wait=100), load(100, 600, 512, issue=100)]
    path = path_of(ops_of(rows), True)
    assert chain(path) == [(0, "start", 0, 100), (1, "engine", 100, 100),
                           (2, "queue", 100, 100), (3, "issue", 100, 600)]
    assert path.filter(pl.col("op_id") == 2)["wait_ps"].item() == 100  # its stall is covered


def test_a_program_started_in_a_freed_slot_is_bound_by_a_slot_edge() -> None:
    rows = [exp(0, 100, 0, 64), load(100, 600, 0, program=1)]
    path = path_of(ops_of(rows), False)
    assert chain(path) == [(0, "start", 0, 100), (1, "slot", 100, 600)]


def test_a_kernel_that_waited_for_a_message_goes_on_when_it_was_sent() -> None:
    # PE 1 computes until 300 and sends to PE 0; PE 0 posted its receive at 0 and (as on
    # the chip) goes on once the message is sent, before it lands at 600: its next op is
    # issued at 300 by the send, not by the receive's posting (the path would start there)
    msg = operand("ipcq", 4096, 64)
    rows = [exp(0, 300, 0, 64, pe=1),
            dict(name="send", t=300, busy=20, end=600, ins=[operand("tcm", 64, 64, pe=1)],
                 out=msg, pe=1, attrs='{"to":0}'),
            dict(name="recv", t=600, busy=0, ins=[msg], out=operand("tcm", 0, 64),
                 issue=0, attrs='{"from":1}'),
            exp(600, 100, 0, 64, issue=300),
            load(300, 2000, 512, issue=300)]
    path = path_of(ops_of(rows), True)
    assert chain(path) == [(0, "start", 0, 300), (1, "issue", 300, 300),
                           (3, "message", 300, 300), (4, "issue", 300, 2000)]
    assert path["path_ps"].sum() == 2000


def test_a_writer_waiting_for_an_earlier_reader_is_bound_by_a_war_edge_under_async() -> None:
    store = dict(name="dma_write", t=0, busy=10, end=500, ins=[operand("tcm", 0, 64)],
                 out=operand("hbm", 0, 64))
    rows = [store, exp(500, 20, 256, 0, issue=0)]  # overwrites what the store reads
    assert chain(path_of(ops_of(rows), True)) == [(0, "start", 0, 500), (1, "war", 500, 520)]
    # blocking issue has no WAR edge: only program order (the store's issue) binds the exp
    assert chain(path_of(ops_of(rows), False)) == [(0, "start", 0, 0), (1, "issue", 0, 520)]


def test_a_composite_ends_with_its_last_child_and_its_children_chain_from_its_issue() -> None:
    from .conftest import composite_ops

    path = path_of(composite_ops())
    # load a -> the GEMM (parent, waited for a) -> its first tile load, issued with it ->
    # the first dot (its tile) -> the second dot (the GEMM engine) -> the exp, which waited
    # for the GEMM's result: its end is the last dot's
    assert [(o, e) for o, e, _, _ in chain(path)] == [
        (0, "start"), (1, "data"), (2, "issue"), (4, "data"), (5, "engine"), (6, "data")]
    assert path["path_ps"].to_list() == [50, 0, 50, 50, 150, 10]
    assert set(path["edge"]) <= set(EDGES)


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scale-exp on one program: load, scale, exp, store per tile, one after another."""
    from kernbench.kernels.registry import build_case

    out = tmp_path_factory.mktemp("cp") / "serial.ktrace"
    kb.record(build_case("scale-exp", {"rows": 1, "n": 1024, "tile": 256}), out)
    return out


def test_v1_serial_chain_is_the_whole_path_and_agrees_with_the_wait_by_line_picture(
        serial: Path) -> None:
    trace = kb.Trace.open(serial)
    path = critical_path(trace)
    ops = load_ops(trace).filter(pl.col("kind") != "scope")
    assert path["op_id"].to_list() == ops["op_id"].to_list()  # every op, in order
    assert int(path["path_ps"].sum()) == trace.manifest["t_end_ps"]
    assert (path["t_from_ps"].shift(-1).drop_nulls() == path["t_to_ps"].head(-1)).all()
    # under v1 the kernel's stalls are on the path, attributed to the line that waited
    on_path = path.group_by("src").agg(pl.col("wait_ps").sum()).filter(pl.col("wait_ps") > 0)
    assert dict(on_path.iter_rows()) == dict(
        data.wait_by_line(trace).select("src", "wait_ps").iter_rows())
    # the loads' DMA latency is what the stalls wait for: each load covers one stall
    loads = path.filter(pl.col("name") == "dma_read")
    assert int(loads["path_ps"].sum()) == int(path["wait_ps"].sum())


def test_report_and_its_json_give_the_path_by_engine_and_by_line(serial: Path) -> None:
    r = report(serial)
    latency = r.metrics["latency_ps"]
    c = r.critical
    assert c["path_ps"] == latency and c["share"] == 1.0
    assert sum(e["path_ps"] for e in c["by_engine"]) == latency
    assert sum(line["path_ps"] for line in c["by_line"]) == latency
    assert {e["engine"] for e in c["by_engine"]} == {"dma_rd", "dma_wr", "math"}
    text = r.to_text()
    assert "critical path by engine" in text and "critical path by source line" in text
    doc = json.loads(r.to_json())
    assert doc["critical_path"] == json.loads(json.dumps(c))
    top = c["by_line"][0]
    assert top["share"] == pytest.approx(top["path_ps"] / latency)


def test_summary_folds_lines_past_top_into_other_lines(serial: Path) -> None:
    path = critical_path(serial)
    full, one = summary(path, 1000), summary(path, 1000, top=1)
    assert len(one["by_line"]) == 2 and one["by_line"][1]["src"] == "(other lines)"
    assert sum(r["path_ps"] for r in one["by_line"]) == sum(r["path_ps"]
                                                            for r in full["by_line"])


def test_timeline_draws_the_path_through_the_engine_rows_it_runs_on(serial: Path) -> None:
    trace = kb.Trace.open(serial)
    m = kb.analyze.metrics(trace)
    spans, by_line = critical(trace, m)
    assert by_line is None  # v1: the by-line chart stays the stalls
    ax = Figure().add_subplot()
    draw_timeline(ax, trace, None, spans)
    (lines,) = [c for c in ax.collections
                if isinstance(c, LineCollection) and c.get_label() == PATH_LABEL]
    drawn = sum(seg[1][0] - seg[0][0] for seg in lines.get_segments())
    assert drawn == pytest.approx(trace.manifest["t_end_ps"] / 1e6)  # µs: the whole latency
    labels = [t.get_text() for t in ax.get_yticklabels()]
    rows = {labels[round(seg[0][1])] for seg in lines.get_segments()}
    assert rows == {"PE0 dma_rd", "PE0 math", "PE0 dma_wr"}


def test_by_line_chart_is_on_the_critical_path_when_engines_issue_async(
        serial: Path, edit_trace) -> None:
    hw = {**hw_of(kb.Trace.open(serial)).to_dict(), "engine_issue": "async"}
    trace = kb.Trace.open(edit_trace(serial, lambda df: df, hw=hw))
    m = kb.analyze.metrics(trace)
    _, by_line = critical(trace, m)
    assert by_line is not None
    ax = Figure().add_subplot()
    draw_wait(ax, trace, by_line)
    assert ax.get_title().startswith("on the critical path")
    widths = sorted(round(p.get_width() * 1e6) for p in ax.patches)
    assert widths == sorted(r["path_ps"] for r in by_line["by_line"])


def test_prefill_path_runs_gemm_and_math_in_series_on_v1_and_is_mostly_math_on_v2(
        tmp_path: Path) -> None:
    from kernbench.kernels.registry import build_case

    params = {"S": 256, "T_q": 16, "T_kv": 128, "H_q": 8, "H_kv": 1}
    share = {}
    for hw in ("ahbm-v1", "ahbm-v2"):
        trace = kb.record(build_case("gqa-prefill", params), tmp_path / f"{hw}.ktrace", hw=hw)
        path = critical_path(trace)
        latency = trace.manifest["t_end_ps"]
        assert int(path["path_ps"].sum()) == latency  # the path tiles the latency
        assert kb.analyze.check(trace).ok  # race detector included
        share[hw] = {e: ps / latency for e, ps in
                     path.group_by("engine").agg(pl.col("path_ps").sum()).iter_rows()}
        if hw == "ahbm-v1":  # blocking: every GEMM is followed on the path by its softmax
            engines = path.filter(pl.col("engine").is_in(["gemm", "math"]))["engine"]
            assert (engines == "gemm").sum() > 0
            assert ((engines == "gemm") & (engines.shift(-1) == "math")).sum() == (
                engines == "gemm").sum()
    assert share["ahbm-v2"]["math"] > share["ahbm-v1"]["math"]
    assert share["ahbm-v2"]["gemm"] < share["ahbm-v1"]["gemm"]
    assert share["ahbm-v2"]["math"] > 0.75


def test_html_report_has_the_critical_path_tables(serial: Path, tmp_path: Path) -> None:
    from kernbench.plot.html import html_report

    out = tmp_path / "r.html"
    html_report(serial, out)
    text = out.read_text(encoding="utf-8")
    section = text[text.index("<h2>critical path</h2>"):text.index("<h2>ops</h2>")]
    assert "covering 1.000 of it" in section
    for row in report(serial).critical["by_line"]:
        assert f"<td>{row['src']}</td>" in section
