"""Notebook and typing: short reprs, ``_repr_html_``, ``kb.Trace(path)``, ``py.typed``."""

from __future__ import annotations

import json
import tomllib
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

import kernbench as kb
from kernbench.errors import TraceFormatError
from kernbench.replay import ReplayResult

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "traces" / "gemm.ktrace"


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        if data.strip():
            self.cells.append(data.strip())


def _parse(text: str) -> _Cells:
    p = _Cells()
    p.feed(text)
    return p


def test_trace_of_a_path_is_trace_open():
    a, b = kb.Trace(GEMM), kb.Trace.open(GEMM)
    assert a.manifest == b.manifest and a.path == b.path
    assert a.ops.equals(b.ops)
    assert repr(a) == repr(b) == f"Trace({str(GEMM)!r}, case='gemm', n_ops={b.n_ops})"


def test_trace_of_a_modified_trace_is_refused_like_open(tmp_path):
    import shutil

    shutil.copytree(GEMM, tmp_path / "t.ktrace")
    with open(tmp_path / "t.ktrace" / "ops.parquet", "ab") as f:
        f.write(b"x")
    with pytest.raises(TraceFormatError, match="sha256"):
        kb.Trace(tmp_path / "t.ktrace")
    assert kb.Trace(tmp_path / "t.ktrace", verify=False).n_ops == kb.Trace(GEMM).n_ops
    with pytest.raises(TraceFormatError, match="not a trace"):
        kb.Trace(tmp_path)


def test_trace_html_names_case_ops_and_latency():
    t = kb.Trace(GEMM)
    cells = _parse(t._repr_html_())
    assert "table" in cells.tags
    for want in ("gemm", str(t.n_ops), str(t.t_end_ps)):
        assert want in cells.cells


def test_metrics_are_a_dict_with_a_short_repr_and_a_table():
    m = kb.analyze.metrics(GEMM)
    assert isinstance(m, dict) and json.loads(json.dumps(m)) == dict(m)
    r = repr(m)
    assert r.startswith("Metrics(latency_ps=") and len(r) < 250 and "more" in r
    cells = _parse(m._repr_html_()).cells
    assert cells.count("latency_ps") == 1 and str(m["latency_ps"]) in cells
    assert len([c for c in cells if c in m]) == len(m)  # every metric has its row


def test_report_and_diff_reprs_are_one_line_and_have_tables(tmp_path):
    rep = kb.analyze.report(GEMM)
    assert "\n" not in repr(rep) and repr(rep).startswith("MetricsReport(")
    assert "latency_ps" in _parse(rep._repr_html_()).cells
    other = ROOT / "traces" / "scale-exp.ktrace"
    d = kb.analyze.diff(GEMM, other, fail_on=["latency=+1%"])
    la, lb = d.metrics_a["latency_ps"], d.metrics_b["latency_ps"]
    assert f"latency_ps {la} -> {lb}" in repr(d) and "\n" not in repr(d)
    assert f"exit_code={d.exit_code}" in repr(d)
    cells = _parse(d._repr_html_()).cells
    assert "fail-on latency=+1%" in cells or any(c.startswith("fail-on") for c in cells)
    assert ("FAIL" in cells) == bool(d.exit_code)


def _result(outputs: dict, reference: str | None, **verdict) -> ReplayResult:
    out = np.zeros((512, 512), np.float32)
    return ReplayResult({"y": out}, {"y": 1.5e-7},
                        {"reference": reference, "n_executed": 10, "n_ops": 10,
                         "outputs": outputs, **verdict})


CHECKED = {"checked": True, "ok": True, "max_abs_err": 1.5e-7}


def test_replay_result_repr_is_short_and_says_the_verdict():
    r = repr(_result({"y": CHECKED}, "case gemm"))
    assert r.startswith("ReplayResult(status='verified', verified=True, verified")
    assert len(r) < 200 and "1.5e-07" in r  # no array dump
    wrong = _result({"y": {**CHECKED, "ok": False}}, "case gemm")
    assert "status='wrong', verified=False, WRONG" in repr(wrong)
    cells = _parse(wrong._repr_html_()).cells
    assert "WRONG" in cells and "wrong" in cells and "10/10" in cells
    failed = _result({"y": CHECKED}, "case gemm", error="the reference raised")
    assert "status='failed', verified=False, FAILED" in repr(failed)


def test_a_replay_that_compared_nothing_reads_unverified_in_the_repr_and_the_table():
    unchecked = {"checked": False, "ok": True}
    none = _result({"y": unchecked}, None)
    assert "status='unverified', verified=False, not verified (no reference)" in repr(none)
    empty = _result({"y": unchecked}, "case gemm")  # the reference returned {}
    assert "not verified (the reference did not compare y)" in repr(empty)
    assert not empty.ok and not empty.verified
    cells = _parse(empty._repr_html_()).cells
    assert "unverified" in cells and "verified" not in cells


def test_py_typed_ships_with_the_package():
    assert files("kernbench").joinpath("py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["kernbench"]
    assert project["project"]["entry-points"]["pytest11"]["kernbench"] == "kernbench.testing"
