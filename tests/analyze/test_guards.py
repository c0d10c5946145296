"""Guards in the analyses (ADR-0840): a kernel waiting on a decision shows on the critical
path and in the stall-by-line picture; ``diff`` names the first guard two traces of one
kernel decide differently."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.analyze import diff
from kernbench.analyze.critical import critical_path


@kb.kernel
def length_then_work(lens, x, y, *, n: int):
    """A decode-like program: it reads its length, then works as long as it says."""
    pid = tl.program_id(0)
    k = int(tl.load(lens + pid, (1,), tl.int32))
    a = tl.load(x + pid * n, (n,), tl.float32)
    for _ in range(k):
        a = a * 1.5
    tl.store(y + pid * n, a)


def case(lens: tuple[int, ...] = (3, 1, 4, 2)) -> kb.Case:
    v = np.array(lens, np.int32)
    return kb.Case(name="lengths", kernel=length_then_work, grid=(len(v),),
                   tensors={"lens": kb.tensor(v.shape, "int32", init=kb.data(v)),
                            "x": kb.tensor((len(v), 16), "float32", init=kb.randn(seed=2)),
                            "y": kb.tensor((len(v), 16), "float32", role="output")},
                   params={"n": 16})


@pytest.mark.parametrize("hw", ["ahbm-v1", "ahbm-v2"])
def test_the_critical_path_runs_through_the_guard_waiting_for_its_length(tmp_path, hw):
    trace = kb.record(case(), tmp_path / "c.ktrace", hw=hw)
    path = critical_path(trace)
    on = path.filter(path["name"] == "guard")
    assert on.height == 1  # the slowest program's decision on its length
    assert path["path_ps"].sum() == trace.manifest["t_end_ps"]
    names = path["name"].to_list()
    i = names.index("guard")
    assert names[i - 1] == "dma_read"  # the length it waited for
    assert path["edge"][i + 1] == "decision"  # what it held back
    guard = trace.ops.filter(trace.ops["op_id"] == on["op_id"][0]).to_dicts()[0]
    assert on["wait_ps"][0] == guard["wait_ps"] > 0
    report = kb.analyze.report(trace).to_dict()
    line = next(r for r in report["critical_path"]["by_line"] if r["src"] == guard["src"])
    assert line["wait_ps"] == guard["wait_ps"]  # the stall picture names the decision's line


def test_diff_names_the_first_guard_that_differs(tmp_path):
    a = kb.record(case((3, 1, 4, 2)), tmp_path / "a.ktrace")
    b = kb.record(case((3, 1, 5, 2)), tmp_path / "b.ktrace")
    report = diff(a, b)
    g = report.first_guard
    assert g is not None and g["program"] == 2 and g["k"] == 0 and g["n_different"] == 1
    assert (g["a"]["value"], g["b"]["value"]) == ("4", "5")
    assert "first guard that differs: program 2" in report.to_text()
    assert report.to_dict()["first_guard_difference"] == g
    assert diff(a, kb.record(case(), tmp_path / "c.ktrace")).first_guard is None
