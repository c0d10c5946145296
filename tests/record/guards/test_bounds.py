"""The bounds of decisions on data (ADR-0840): a loop whose bound comes from data counts
against ``KERNBENCH_MAX_OPS`` as it runs, and what a decision evaluates against
``KERNBENCH_MAX_MEMORY_GB``; both refuse with one line at the decision's line, never a
traceback."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench import tl
from kernbench.cli import main
from kernbench.errors import RecordLimitError


@kb.kernel
def forever(x, y):
    v = tl.load(x, (1,), tl.float32)
    while v > 0.0:  # the data never end this loop
        v = v + 1.0
    tl.store(y, v)


def forever_case() -> kb.Case:
    return kb.Case(name="forever", kernel=forever, grid=(1,),
                   tensors={"x": kb.tensor((1,), "float32",
                                           init=kb.data(np.ones(1, np.float32))),
                            "y": kb.tensor((1,), "float32", role="output")})


def test_a_while_on_data_that_never_ends_stops_at_the_op_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNBENCH_MAX_OPS", "500")
    with pytest.raises(RecordLimitError, match=r"test_bounds\.py:\d+: recording stopped: "
                       r"500 ops recorded at a decision on data .*KERNBENCH_MAX_OPS=500"):
        kb.record(forever_case(), tmp_path / "f.ktrace")
    assert not (tmp_path / "f.ktrace").exists()


def test_the_command_line_refuses_it_in_one_line_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNBENCH_MAX_OPS", "300")
    out = tmp_path / "f.ktrace"
    result = CliRunner().invoke(main, ["record", f"{__name__}:forever_case", "-o", str(out)])
    assert result.exit_code == 2, result.output
    lines = [s for s in result.output.splitlines() if s.strip()]
    assert len(lines) == 1 and "KERNBENCH_MAX_OPS=300" in lines[0], result.output
    assert "Traceback" not in result.output and not out.exists()


@kb.kernel
def decide_on_a_big_sum(x, y, *, n: int):
    s = tl.sum(tl.load(x, (n,), tl.float32))
    if s > 0.0:
        tl.store(y, tl.full((1,), 1.0, tl.float32))


def test_a_decision_whose_cone_passes_the_memory_budget_is_refused(tmp_path, monkeypatch):
    n = 1 << 16  # 256 KiB of values in the decision's cone
    case = kb.Case(name="big", kernel=decide_on_a_big_sum, grid=(1,),
                   tensors={"x": kb.tensor((n,), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((1,), "float32", role="output")},
                   params={"n": n})
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", str(100 * 1024 / 2**30))  # 100 KiB
    with pytest.raises(RecordLimitError, match=r"test_bounds\.py:\d+: the decision here needs "
                       r"over 9\.\d+e-05 GiB of values to evaluate \(set "
                       r"KERNBENCH_MAX_MEMORY_GB to raise it\)"):
        kb.record(case, tmp_path / "m.ktrace")
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", "1")
    trace = kb.record(case, tmp_path / "m.ktrace")
    assert (trace.ops["name"].cast(str) == "guard").sum() == 1
