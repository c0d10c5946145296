"""Shared parts on the critical path (ADR-0741): an op log with a known
``shared.parquet`` whose path spends a closed-form time waiting for HBM, TCM, links and
issue, by engine and by source line; the path still tiles the latency; and a recorded trace
with such a file through ``report``, ``--json`` and the HTML report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernbench as kb
from kernbench.analyze import critical_path, report
from kernbench.analyze.critical import path_of
from kernbench.analyze.frames import SHARED_SCHEMA, hw_of, load_shared
from kernbench.analyze.path_summary import summary
from kernbench.errors import TraceFormatError
from tests.conftest import examples

from .conftest import fake_ops, operand, write_shared
from .test_critical_path import exp, load, ops_of


def shared(rows: list[tuple[int, str, str, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SHARED_SCHEMA, orient="row")


def _chain() -> tuple[pl.DataFrame, pl.DataFrame]:
    """A load (busy 100, of which 40 waited for HBM channel 3), an exp on it (busy 50, 20 of
    them waiting for TCM), a send of the result (busy 200, 30 + 10 waiting for two links),
    and a second load the path does not take (its HBM wait is off the path)."""
    a, b = operand("tcm", 0, 64), operand("tcm", 64, 64)
    rows: list[dict[str, Any]] = [
        dict(name="dma_read", t=0, busy=100, end=600, ins=[operand("hbm", 0, 64)], out=a),
        dict(name="exp", t=600, busy=50, ins=[a], out=b),
        dict(name="send", t=650, busy=200, end=1850, ins=[b], out=operand("ipcq", 0, 64, pe=1),
             attrs='{"dir":"next","to":1}'),
        dict(name="dma_read", t=100, busy=50, end=650, ins=[operand("hbm", 64, 64)],
             out=operand("tcm", 128, 64)),
    ]
    waits = [(0, "hbm", "hbm.ch3", 40), (1, "tcm", "tcm.pe0", 20),
             (2, "link", "link.pe0->pe1", 30), (2, "link", "link.pe1->pe2", 10),
             (3, "hbm", "hbm.ch1", 30)]
    return ops_of(rows), shared(waits)


def test_shared_waits_on_the_path_are_attributed_to_their_part_by_engine_and_line() -> None:
    ops, waits = _chain()
    path = path_of(ops, True, waits)
    assert path["op_id"].to_list() == [0, 1, 2]  # the second load is off the path
    assert int(path["path_ps"].sum()) == 1850  # still tiles the latency
    assert path.select("hbm_ps", "tcm_ps", "link_ps", "issue_ps").rows() == [
        (40, 0, 0, 0), (0, 20, 0, 0), (0, 0, 40, 0)]
    s = summary(path, 1850)
    assert {r["part"]: r["path_ps"] for r in s["by_part"]} == {
        "engine": 1850 - 100, "hbm": 40, "tcm": 20, "link": 40, "issue": 0}
    by_engine = {r["engine"]: (r["path_ps"], r["hbm_ps"], r["tcm_ps"], r["link_ps"])
                 for r in s["by_engine"]}
    assert by_engine == {"dma_rd": (600, 40, 0, 0), "math": (50, 0, 20, 0),
                         "link_tx": (1200, 0, 0, 40)}
    by_line = {r["src"]: (r["hbm_ps"], r["tcm_ps"], r["link_ps"]) for r in s["by_line"]}
    assert by_line == {"k.py:1": (40, 0, 0), "k.py:2": (0, 20, 0), "k.py:3": (0, 0, 40)}
    assert {(r["resource"], r["part"]): r["path_ps"] for r in s["by_resource"]} == {
        ("hbm.ch3", "hbm"): 40, ("tcm.pe0", "tcm"): 20, ("link.pe0->pe1", "link"): 30,
        ("link.pe1->pe2", "link"): 10}
    share = {r["part"]: r["share"] for r in s["by_part"]}
    assert share["hbm"] == pytest.approx(40 / 1850)


def test_a_wait_counts_only_where_the_path_covers_the_op() -> None:
    # a MATH queue of one: op 2's issue waits until op 1 starts (100), and the load issued
    # after it ends last; op 0 holds the path for its whole busy time (its TCM wait is on
    # it), op 1 only at its start (its TCM wait is not)
    rows = [exp(0, 100, 0, 64), exp(100, 50, 128, 192, issue=0),
            exp(150, 50, 256, 320, issue=100, wait=100), load(100, 600, 512, issue=100)]
    waits = shared([(0, "tcm", "tcm.pe0", 30), (1, "tcm", "tcm.pe0", 25)])
    path = path_of(ops_of(rows), True, waits)
    assert path.select("op_id", "edge", "path_ps", "tcm_ps").rows() == [
        (0, "start", 100, 30), (1, "engine", 0, 0), (2, "queue", 0, 0), (3, "issue", 500, 0)]


def test_an_op_the_control_processor_delayed_is_bound_by_an_issue_port_edge() -> None:
    # issue_ns 20: three exps the program wanted at 0 issue at 0, 20 and 40
    rows = [dict(name="exp", t=0, busy=5, ins=[], out=operand("tcm", 0, 64)),
            dict(name="exp", t=20, busy=5, ins=[], out=operand("tcm", 64, 64), issue=20),
            dict(name="exp", t=40, busy=100, ins=[], out=operand("tcm", 128, 64), issue=40)]
    waits = shared([(1, "issue", "issue.pe0", 20), (2, "issue", "issue.pe0", 40)])
    path = path_of(ops_of(rows), True, waits, issue_ps=20)
    assert path.select("op_id", "edge", "t_from_ps", "t_to_ps", "issue_ps").rows() == [
        (0, "start", 0, 20, 20), (1, "issue_port", 20, 40, 20), (2, "issue_port", 40, 140, 0)]
    s = summary(path, 140)
    assert {r["part"]: r["path_ps"] for r in s["by_part"]}["issue"] == 40
    assert {r["src"]: r["issue_ps"] for r in s["by_line"]} == {"k.py:1": 20, "k.py:2": 20,
                                                               "k.py:3": 0}
    assert s["by_resource"][0]["resource"] == "issue.pe0"
    # without the file the program-order edge binds and no time is the issue port's
    plain = path_of(ops_of(rows), True)
    assert "issue_port" not in set(plain["edge"]) and int(plain["issue_ps"].sum()) == 0


@pytest.fixture(scope="module")
def serial_v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kernbench.kernels.registry import build_case

    out = tmp_path_factory.mktemp("parts") / "serial.ktrace"
    kb.record(build_case("scale-exp", {"rows": 1, "n": 512, "tile": 256}), out)
    return out


def test_a_recorded_trace_with_shared_waits_reports_them_by_part(serial_v1: Path,
                                                                 tmp_path: Path) -> None:
    import shutil

    trace_dir = tmp_path / "t.ktrace"
    shutil.copytree(serial_v1, trace_dir)
    path = critical_path(trace_dir)
    load = path.filter(pl.col("name") == "dma_read").row(0, named=True)
    store = path.filter(pl.col("name") == "dma_write").row(-1, named=True)
    wait = min(load["busy_ps"], 3000)
    assert "critical path by part" not in report(trace_dir).to_text()  # v1: no shared part
    write_shared(trace_dir, [(load["op_id"], "hbm", "hbm.ch0", wait),
                             (store["op_id"], "hbm", "hbm.ch5", 1000)])
    r = report(trace_dir)
    latency = r.metrics["latency_ps"]
    parts = {p["part"]: p["path_ps"] for p in r.critical["by_part"]}
    assert parts["hbm"] == wait + 1000 and sum(parts.values()) == latency
    assert r.critical["path_ps"] == latency
    doc = json.loads(r.to_json())
    assert doc["critical_path"]["by_part"] == r.critical["by_part"]
    text = r.to_text()
    assert "critical path by part" in text and "hbm.ch5" in text
    by_line = {row["src"]: row["hbm_ps"] for row in r.critical["by_line"]}
    assert by_line[load["src"]] >= wait and sum(by_line.values()) == wait + 1000

    from kernbench.plot.html import critical_parts  # the HTML report's critical-path section

    body = "".join(critical_parts(r.critical))
    assert "<h3>by shared resource</h3>" in body and "<td>hbm.ch0</td>" in body
    assert "<h3>by part (the engines" in body


def test_a_shared_file_with_an_unknown_part_is_refused_in_one_line(serial_v1: Path,
                                                                   tmp_path: Path) -> None:
    import shutil

    trace_dir = tmp_path / "t.ktrace"
    shutil.copytree(serial_v1, trace_dir)
    assert load_shared(kb.Trace.open(trace_dir)).height == 0  # none: an empty frame
    write_shared(trace_dir, [(1, "dram", "dram.ch0", 5)])
    with pytest.raises(TraceFormatError, match=r"part 'dram'"):
        critical_path(trace_dir)
    assert hw_of(kb.Trace.open(trace_dir)).issue_ns == 0


def test_without_shared_waits_the_path_has_no_part_time() -> None:
    path = path_of(fake_ops([dict(name="exp", t=0, busy=10, ins=[], out=operand("tcm", 0, 64))]))
    assert path.select("hbm_ps", "tcm_ps", "link_ps", "issue_ps").rows() == [(0, 0, 0, 0)]
    assert path["resources"].to_list() == [[]]


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["hbm", "tcm", "link", "issue"]),
                          st.integers(1, 2000)), max_size=8),
       st.sampled_from([0, 20]))
def test_any_shared_waits_split_the_path_without_changing_its_tiling(
        waits: list[tuple[int, str, int]], issue_ps: int) -> None:
    """Waits of any size (larger than the op's busy time too) on any op: every path op's
    parts are non-negative and at most its time on the path, and the parts with the engines'
    own work add up to the latency."""
    ops, _ = _chain()
    rows = [(op, part, f"{part}.x{i % 2}", ps) for i, (op, part, ps) in enumerate(waits)]
    path = path_of(ops, True, shared(rows), issue_ps=issue_ps)
    assert int(path["path_ps"].sum()) == 1850
    parts = path.select(pl.sum_horizontal("hbm_ps", "tcm_ps", "link_ps", "issue_ps"))
    assert (parts.to_series() <= path["path_ps"]).all()
    assert (path.select("hbm_ps", "tcm_ps", "link_ps", "issue_ps").min_horizontal() >= 0).all()
    s = summary(path, 1850)
    assert sum(r["path_ps"] for r in s["by_part"]) == 1850
    assert min(r["path_ps"] for r in s["by_part"]) >= 0
