"""Reports: aligned tables on a terminal, JSON with --json, for every command."""

from __future__ import annotations

import json

from kernbench.analyze import check, metrics, report
from kernbench.analyze.report import fmt, format_table


def test_format_table_aligns_columns() -> None:
    text = format_table(["name", "count", "util"], [["dma_read", 6, 0.5], ["dot", 12, 0.125]])
    lines = text.splitlines()
    assert lines[0] == "name      count   util"
    assert lines[1] == "--------  -----  -----"
    assert lines[2] == "dma_read      6    0.5"
    assert lines[3] == "dot          12  0.125"


def test_fmt() -> None:
    assert [fmt(v) for v in (None, True, 3, 2.5e6, 0.38072, 1e-5)] == [
        "-", "yes", "3", "2500000", "0.3807", "1e-05"]


def test_metrics_report_text_and_json(traces) -> None:
    path = traces("gemm", N=256)
    r = report(path)
    text = r.to_text()
    assert r.exit_code == 0
    for label in ("latency (ps)", "efficiency", "roofline bound", "engines", "dma_rd",
                  "scratch per PE"):
        assert label in text
    row = next(line for line in text.splitlines() if line.startswith("latency (ps)"))
    assert row.split()[-1] == str(metrics(path)["latency_ps"])
    doc = json.loads(r.to_json())
    assert doc["metrics"] == metrics(path)
    assert {(o["kind"], o["name"]) for o in doc["by_op"]} == {
        ("memory", "dma_read"), ("memory", "dma_write"), ("gemm", "dot")}


def test_check_report_json(traces) -> None:
    doc = json.loads(check(traces("softmax")).to_json())
    assert doc["ok"] is True and doc["n_violations"] == 0
    assert [i["name"] for i in doc["invariants"]][-2:] == ["data_race", "outputs_covered"]
    assert all(i["violations"] == [] for i in doc["invariants"])


def test_report_lists_one_ceiling_per_engine_and_marks_the_bound(traces) -> None:
    path = traces("gemm", N=256)
    m = metrics(path)
    text = report(path).to_text()
    section = text.split("roofline (a ceiling per engine")[1].split("\n\nops")[0]
    rows = {line.split()[0]: line.split() for line in section.splitlines()[4:]}
    assert set(rows) == {"hbm", "gemm", "math", "link"}
    bound = {"dma_rd": "hbm", "dma_wr": "hbm"}.get(m["roofline_bound"], m["roofline_bound"])
    assert [name for name, r in rows.items() if r[-1] == "*"] == [bound]
    frac = next(line for line in text.splitlines() if line.startswith("roofline fraction"))
    assert float(frac.split()[-1]) == round(m["roofline_ps"] / m["latency_ps"], 4)
