"""The race detector's three orders within a program, planted in a recorded trace by hand: ``check``
reports a write that lands before an earlier read of its bytes (WAR) and one that lands
before an earlier write of them (WAW); program order is per program where resident programs
interleave on a PE."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.analyze import check
from kernbench.analyze.frames import load_ops
from kernbench.analyze.race import hazards

from ..conftest import rewrite_ops
from .conftest import fake_ops, operand


@kb.kernel
def reload(x, y, *, n: int):
    buf = tl.load(x, (n,), tl.float32)  # op 0 writes buf
    tl.store(y, tl.exp(buf))  # op 1 reads buf, op 2 stores its result
    tl.load(x + n, (n,), tl.float32, out=buf)  # op 3 writes buf again
    tl.store(y + n, tl.exp(buf))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    case = kb.Case(name="reload", kernel=reload, grid=(1,),
                   tensors={"x": kb.tensor((2, 64), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((2, 64), "float32", role="output")},
                   params={"n": 64}, reference=lambda x: {"y": np.exp(x)})
    return kb.record(case, tmp_path_factory.mktemp("race") / "reload.ktrace").path


def planted(src: Path, dst: Path, times: dict[int, tuple[int, int]]) -> Path:
    """A copy of ``src`` with op ``i`` issued and started at ``times[i][0]`` and ending at
    ``times[i][1]``."""
    shutil.copytree(src, dst)

    def edit(rows: list[dict[str, Any]]) -> None:
        for op_id, (start, end) in times.items():
            rows[op_id].update(t_issue_ps=start, t_start_ps=start, t_end_ps=end, wait_ps=0)

    rewrite_ops(dst, edit)
    return dst


def found(path: Path) -> set[tuple[str, int, int]]:
    h = hazards(load_ops(kb.Trace.open(path)))
    return set(zip(h["hazard"], h["op_id"], h["other_op_id"], strict=True))


def test_the_recorded_reuse_is_clean(recorded: Path) -> None:
    assert check(recorded).ok and not found(recorded)


def test_check_reports_a_write_landing_before_an_earlier_read_of_its_bytes_started(
        recorded: Path, tmp_path: Path) -> None:
    # the exp (op 1) now reads buf from 600 ns; the second load (op 3) lands at 550 ns,
    # after the first load's data (502 ns) but before that read starts: WAR only
    path = planted(recorded, tmp_path / "war.ktrace",
                   {1: (600_000, 610_000), 2: (610_000, 1_112_000), 3: (3_000, 550_000)})
    assert found(path) == {("war", 1, 3)}
    report = check(path)
    assert not report.ok
    text = report.to_text()
    assert "op 3 (later in program order) writes tcm" in text
    assert "before op 1's read of it completes" in text


def test_check_reports_a_write_landing_before_an_earlier_write_of_its_bytes(
        recorded: Path, tmp_path: Path) -> None:
    # the second load (op 3) lands at 400 ns, before the first (op 0) at 502 ns
    path = planted(recorded, tmp_path / "waw.ktrace", {3: (3_000, 400_000)})
    assert ("waw", 3, 0) in found(path)
    assert ("war", 1, 3) in found(path)  # it also overtakes the exp's read of op 0's data
    text = check(path).to_text()
    assert "op 3's write to tcm@pe0 [0, 256) lands at 400000 ps, before the earlier write " \
           "of op 0 (lands at 502000 ps)" in text


def test_program_order_is_per_program_where_resident_programs_interleave() -> None:
    import polars as pl

    # op 0 writes tcm [0, 64), landing at 100; op 1 reads it at 50; op 2 comes after both
    rows = [dict(name="exp", t=0, busy=100, ins=[], out=operand("tcm", 0, 64)),
            dict(name="exp", t=50, busy=10, ins=[operand("tcm", 0, 64)],
                 out=operand("tcm", 128, 64)),
            dict(name="exp", t=200, busy=1, ins=[], out=operand("tcm", 512, 64))]

    def hazards_of(programs: list[int]) -> set[tuple[str, int]]:
        df = fake_ops(rows).with_columns(program=pl.Series(programs, dtype=pl.Int32))
        h = hazards(df)
        return set(zip(h["hazard"], h["op_id"], strict=True))

    # one program: its read comes before its own write has landed
    assert hazards_of([0, 0, 0]) == {("raw", 1)}
    # programs 0 and 1 interleave on the PE (resident): the read is program 1's, which
    # never wrote those bytes; program 0's write is not earlier in *its* program order
    assert hazards_of([0, 1, 0]) == {("uninit_read", 1)}
    # programs one after another (program 1 starts after program 0's last op): PE order
    assert hazards_of([0, 0, 1]) == {("raw", 1)}
