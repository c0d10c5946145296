"""Head-of-line waits on the critical path (issue 41, ADR-0740): an op released by another
program's op on its engine or its engine's queue is ``behind`` it, named with that program
and its line, by engine and by source line, under either arbitration policy; checked on
hand-built op logs and on a real ahbm-v2 recording of two resident programs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import critical_path, report
from kernbench.analyze.critical import path_of
from kernbench.analyze.path_summary import summary
from kernbench.trace.hw import PRESETS

from .test_critical_path import chain, exp, load, ops_of

GOLDEN_V2 = Path(__file__).resolve().parents[2] / "traces" / "v2"


def test_an_op_that_waited_for_an_engine_held_by_another_program_is_behind_it() -> None:
    # program 1's exp was issued at 0 and started when program 0's freed the MATH engine
    rows = [exp(0, 100, 0, 64, program=0), exp(100, 50, 128, 192, issue=0, program=1)]
    path = path_of(ops_of(rows), True)
    assert chain(path) == [(0, "start", 0, 100), (1, "behind", 100, 150)]
    row = path.row(1, named=True)
    assert (row["behind_program"], row["behind_src"], row["behind_ps"]) == (0, "k.py:1", 100)
    # the same two ops in one program: plain engine order, nothing behind
    same = path_of(ops_of([exp(0, 100, 0, 64), exp(100, 50, 128, 192, issue=0)]), True)
    assert list(same["edge"]) == ["start", "engine"] and same["behind_program"].is_null().all()


def test_an_issue_stalled_on_a_queue_full_of_another_programs_ops_is_behind_them() -> None:
    # program 1's exp could not be issued until program 0's op 1 left the one-slot queue
    rows = [exp(0, 100, 0, 64), exp(100, 50, 128, 192, issue=0),
            exp(150, 50, 256, 320, issue=100, wait=100, program=1),
            load(100, 600, 512, issue=100, program=1)]
    path = path_of(ops_of(rows), True)
    assert [e for _, e, _, _ in chain(path)] == ["start", "engine", "behind", "issue"]
    row = path.filter(pl.col("edge") == "behind").row(0, named=True)
    assert (row["op_id"], row["behind_program"], row["behind_src"]) == (2, 0, "k.py:2")
    # its stall is on the path; op 1 itself holds the path no time (it started as released)
    assert (row["wait_ps"], row["behind_ps"]) == (100, 0)
    s = summary(path, 600)
    assert s["behind"] == [{"src": "k.py:3", "engine": "math", "behind_src": "k.py:2",
                            "programs": 1, "ops": 1, "behind_ps": 0, "wait_ps": 100,
                            "path_ps": 0, "share": 0.0}]
    assert {r["src"]: r["wait_ps"] for r in s["by_line"]}["k.py:3"] == 100


@pytest.fixture(scope="module", params=[("in_order", 2), ("in_order", 8), ("ready_first", 2)],
                ids=["in_order-queue2", "in_order-queue8", "ready_first-queue2"])
def resident(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scale-exp, two programs resident on one PE of ahbm-v2 (load -> scale -> exp -> store
    per tile, each tile's ops depending on the last): in-order engine queues of 2 and 8 ops,
    and ready-first arbitration (timed by the chip)."""
    from kernbench.kernels.registry import build_case

    policy, depth = request.param
    hw = dataclasses.replace(PRESETS["ahbm-v2"], n_pe=1, engine_queue_depth=depth,
                             engine_arbitration=policy)
    out = tmp_path_factory.mktemp("hol") / f"{policy}-q{depth}.ktrace"
    kb.record(build_case("scale-exp", {"rows": 2, "n": 512, "tile": 256}), out, hw=hw)
    return out


def test_v2_resident_programs_path_names_the_program_it_waited_behind(resident: Path) -> None:
    trace = kb.Trace.open(resident)
    path = critical_path(trace)
    ops = trace.ops
    behind = path.filter(pl.col("edge") == "behind")
    assert behind.height >= 1
    for r in behind.iter_rows(named=True):
        assert r["behind_program"] != r["program"]
        same_engine = ops.filter((pl.col("pe") == r["pe"]) & (pl.col("engine") == r["engine"])
                                 & (pl.col("program") == r["behind_program"]))
        if r["wait_ps"]:  # a full queue: the other program's op started as it issued
            other = same_engine.filter(pl.col("t_start_ps") == r["t_issue_ps"])
        else:  # a held engine: the other program's op freed it as it started
            other = same_engine.filter(pl.col("t_start_ps") + pl.col("busy_ps")
                                       == r["t_start_ps"])
        assert other.height >= 1 and r["behind_src"] in set(other["src"])
        assert r["behind_src"].startswith("kernbench/kernels/examples.py:")
    rep = report(trace)
    listed = {(b["src"], b["behind_src"]) for b in rep.critical["behind"]}
    assert listed == set(behind.select("src", "behind_src").iter_rows())
    assert sum(b["behind_ps"] for b in rep.critical["behind"]) == int(behind["behind_ps"].sum())
    # each is the path time of the op waited behind: the op just before it on the path
    before = path["path_ps"].shift(1)
    assert (path.filter(pl.col("edge") == "behind")["behind_ps"].to_list()
            == before.filter(path["edge"] == "behind").to_list())
    assert int(path["behind_ps"].sum()) <= trace.t_end_ps
    assert "head-of-line waits" in rep.to_text()


def test_report_sums_head_of_line_waits_by_engine_and_by_line(resident: Path) -> None:
    """Under either policy the report's by-engine and by-line rows carry the path's
    ``behind_ps`` of their ops, and the text names the waits by line and engine."""
    trace = kb.Trace.open(resident)
    path = critical_path(trace)
    behind = path.filter(pl.col("edge") == "behind")
    c = report(trace).critical
    for key, col in (("by_engine", "engine"), ("by_line", "src")):
        want = {k: int(v) for k, v in behind.group_by(col).agg(pl.col("behind_ps").sum())
                .iter_rows()}
        got = {r[col]: r["behind_ps"] for r in c[key] if r[col] in want}
        assert want and got == want, (key, got, want)
        assert all(r["behind_ps"] == 0 for r in c[key] if r[col] not in want)
    text = report(trace).to_text()
    for b in c["behind"]:
        assert any(b["src"] in line and b["engine"] in line and b["behind_src"] in line
                   for line in text.splitlines())


def test_one_program_per_pe_has_no_head_of_line_wait() -> None:
    for name in ("scale-exp", "gqa-prefill"):
        trace = kb.Trace.open(GOLDEN_V2 / f"{name}.ktrace")
        per_pe = trace.ops.group_by("pe").agg(pl.col("program").n_unique())["program"]
        assert per_pe.max() == 1
        assert "behind" not in set(critical_path(trace)["edge"])
