"""Record-time bounds (``record/lowering/bounds.py``, ADR-0546, ADR-0861): no launch records
more than ``KERNBENCH_MAX_OPS`` ops nor runs more than ``KERNBENCH_MAX_PROGRAMS`` programs; a
grid or the first program's projection beyond them is refused before the rest runs,
otherwise recording stops at the bound (issue 27, point 5; issue 38)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import BadInputError, RecordLimitError
from kernbench.record.lowering import bounds
from kernbench.record.lowering.bounds import (
    DEFAULT_MAX_OPS,
    DEFAULT_MAX_PROGRAMS,
    MAX_OPS_ENV,
    MAX_PROGRAMS_ENV,
    max_ops,
    max_programs,
)
from kernbench.record.recorder import layout, run_programs
from kernbench.record.rows.writer import OpWriter
from kernbench.trace.hw import load_hw

#: the programs that started, in order (a kernel's side channel for these tests)
RAN: list[int] = []
N = 16


@kb.kernel
def growing(x, y, *, extra: int):
    """3 ops in program 0; program p records ``extra * p`` more."""
    pid = tl.program_id(0)
    RAN.append(pid)
    a = tl.load(x + pid * N, (N,), tl.float32)
    for _ in range(extra * pid):
        a = a * 1.0
    tl.store(y + pid * N, a * 2.0)


def _case(grid: int, extra: int = 0) -> kb.Case:
    return kb.Case(name="growing", kernel=growing, grid=(grid,),
                   tensors={"x": kb.tensor((grid, N), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((grid, N), "float32", role="output")},
                   params={"extra": extra})


@pytest.fixture(autouse=True)
def _ran():
    RAN.clear()
    yield
    RAN.clear()


def test_the_bound_defaults_to_twenty_million_and_reads_the_environment(monkeypatch):
    monkeypatch.delenv(MAX_OPS_ENV, raising=False)
    assert max_ops() == DEFAULT_MAX_OPS == 20_000_000
    monkeypatch.setenv(MAX_OPS_ENV, "1_000")
    assert max_ops() == 1000


@pytest.mark.parametrize("bad", ["abc", "0", "-5", "1.5"])
def test_a_bound_that_is_not_a_positive_integer_is_bad_input(monkeypatch, tmp_path, bad):
    monkeypatch.setenv(MAX_OPS_ENV, bad)
    with pytest.raises(BadInputError, match=rf"^{MAX_OPS_ENV}={re.escape(repr(bad))} is not "
                                            "a positive integer"):
        kb.record(_case(2), tmp_path / "t.ktrace")
    assert RAN == []


def test_a_grid_beyond_the_bound_is_refused_before_any_program_runs(monkeypatch, tmp_path):
    monkeypatch.setenv(MAX_OPS_ENV, "10")
    out = tmp_path / "t.ktrace"
    with pytest.raises(RecordLimitError, match=r"^launch refused: the grid \[11\] has 11 "
                                               r"programs, more than KERNBENCH_MAX_OPS=10 "):
        kb.record(_case(11), out)
    assert RAN == [] and not out.exists()


def test_the_first_program_projects_the_launch(monkeypatch, tmp_path):
    monkeypatch.setenv(MAX_OPS_ENV, "11")  # 4 programs of 3 ops: 12
    out = tmp_path / "t.ktrace"
    with pytest.raises(RecordLimitError, match=r"^launch refused: its first program recorded "
                                               r"3 ops, so its 4 programs project to 12 ops, "
                                               r"more than KERNBENCH_MAX_OPS=11 allows"):
        kb.record(_case(4), out)
    assert RAN == [0] and not out.exists()  # no other program ran
    monkeypatch.setenv(MAX_OPS_ENV, "12")  # exactly the bound records
    assert kb.record(_case(4), out).n_ops == 12 and sorted(RAN[1:]) == [0, 1, 2, 3]


def test_recording_stops_at_the_bound_when_later_programs_record_more(monkeypatch,
                                                                    tmp_path: Path):
    monkeypatch.setenv(MAX_OPS_ENV, "100")  # program 0: 3 ops (12 projected); in all: 252
    case = _case(4, extra=40)
    batch = 64
    writer = OpWriter(tmp_path / "ops.parquet", batch_rows=batch)
    try:
        with pytest.raises(RecordLimitError, match=r"^recording stopped: (\d+) ops recorded, "
                                                   r"more than KERNBENCH_MAX_OPS=100") as info:
            run_programs(case, load_hw("ahbm-v1"), writer, layout(case))
    finally:
        writer.abort()
    got = int(re.search(r"stopped: (\d+) ops", str(info.value)).group(1))  # type: ignore[union-attr]
    assert 100 < got <= 100 + batch  # within one written batch of the bound
    monkeypatch.setenv(MAX_OPS_ENV, "252")
    assert kb.record(case, tmp_path / "t.ktrace").n_ops == 252


def test_the_program_bound_defaults_to_a_million_and_reads_the_environment(monkeypatch):
    monkeypatch.delenv(MAX_PROGRAMS_ENV, raising=False)
    assert max_programs() == DEFAULT_MAX_PROGRAMS == 1_000_000
    monkeypatch.setenv(MAX_PROGRAMS_ENV, "2_000_000")
    assert max_programs() == 2_000_000


@pytest.mark.parametrize("bad", ["abc", "0", "-5", "1.5"])
def test_a_program_bound_that_is_not_a_positive_integer_is_bad_input(monkeypatch, tmp_path,
                                                                     bad):
    monkeypatch.setenv(MAX_PROGRAMS_ENV, bad)
    with pytest.raises(BadInputError, match=rf"^{MAX_PROGRAMS_ENV}={re.escape(repr(bad))} is "
                                            "not a positive integer number of programs"):
        kb.record(_case(2), tmp_path / "t.ktrace")
    assert RAN == []


def test_a_grid_beyond_the_program_bound_is_refused_before_any_program_runs(monkeypatch,
                                                                            tmp_path):
    monkeypatch.setenv(MAX_PROGRAMS_ENV, "3")
    out = tmp_path / "t.ktrace"
    with pytest.raises(RecordLimitError, match=r"^launch refused: the grid \[4\] has 4 "
                                               r"programs, more than KERNBENCH_MAX_PROGRAMS=3 "
                                               r"allows \(each program runs the kernel's body "
                                               r".*\); set KERNBENCH_MAX_PROGRAMS to raise the "
                                               r"bound$"):
        kb.record(_case(4), out, hw="ahbm-v1")
    assert RAN == [] and not out.exists()
    assert kb.record(_case(3), out, hw="ahbm-v1").n_ops == 9 and RAN == [0, 1, 2]


def test_finished_programs_are_reported_every_tick(monkeypatch, tmp_path):
    """Programs that record little still show progress (``kernbench record`` on a
    terminal prints them): every ``PROGRAM_TICK`` finished programs, and never otherwise."""
    monkeypatch.setattr(bounds, "PROGRAM_TICK", 2)
    seen: list[tuple[int, int]] = []
    kb.record(_case(5), tmp_path / "t.ktrace", hw="ahbm-v1",
              programs=lambda done, grid: seen.append((done, grid)))
    assert seen == [(2, 5), (4, 5)]
