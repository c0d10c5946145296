"""Hostile Triton launches are refused up front, in one line (issue 27, point 5; ADR-0546;
issue 38, ADR-0861): a grid of 10^7 programs (by the program bound before any program runs,
whether its programs do nothing or not; under a raised program bound, projected from its
first program) and a constexpr loop of 10^9 iterations (the loop nest's trip count at its
line)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl
from click.testing import CliRunner

import kernbench as kb
from kernbench import triton as kbt
from kernbench.cli import main
from kernbench.errors import RecordLimitError
from kernbench.record.lowering import bounds

HERE = re.escape(f"{__name__.replace('.', '/')}.py")
ROOT = Path(__file__).resolve().parents[2]


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # the README's
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


def wide_add_grid(programs: int = 10**7, n: int = 5000, block: int = 1024) -> kb.Case:
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    y, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    return kbt.case(add_kernel, (programs,), x, y, out, n, BLOCK=block, name="add")


@triton.jit
def spin_kernel(x_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(N):
        acc += tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), acc)


def long_loop(trips: int = 10**9, block: int = 16) -> kb.Case:
    return kbt.case(spin_kernel, (1,), np.zeros(block, np.float32), N=trips, BLOCK=block)


@triton.jit
def nest_kernel(x_ptr, OUTER: tl.constexpr, INNER: tl.constexpr, BLOCK: tl.constexpr):
    acc = 0
    for _i in tl.range(0, OUTER):
        for _j in tl.static_range(INNER):
            acc += 1
    tl.store(x_ptr + tl.arange(0, BLOCK), acc)


@triton.jit
def early_return_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:  # the usual guard: every program past the data returns at once
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def nothing_grid(kind: str = "masked-add", programs: int = 10**7) -> kb.Case:
    """10^7 programs that do nothing: the add with n = 0 (every lane masked off, 4 ops a
    program) or an early return (no op at all)."""
    x = np.zeros(1, np.float32)
    if kind == "masked-add":
        return kbt.case(add_kernel, (programs,), x, x.copy(), x.copy(), 0, BLOCK=1024,
                        name="add-nothing")
    return kbt.case(early_return_kernel, (programs,), x, x.copy(), 0, BLOCK=1024,
                    name="early-return")


def _nest(outer: int, inner: int, grid: int = 2) -> kb.Case:
    return kbt.case(nest_kernel, (grid,), np.zeros(16, np.float32), OUTER=outer, INNER=inner,
                    BLOCK=16, outputs=["x_ptr"])


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(("factory", "message"), [
    ("wide_add_grid", r"launch refused: its first program recorded 4 ops, so its 10,000,000 "
                      r"programs project to 40,000,000 ops, more than KERNBENCH_MAX_OPS="
                      r"20,000,000 allows"),
    ("long_loop", rf"{HERE}:\d+: launch refused: a loop of 1,000,000,000 iterations in each "
                  r"of 1 program is 1,000,000,000 iterations, more than KERNBENCH_MAX_OPS="
                  r"20,000,000 ops allow \(an iteration counts as at least one op\)"),
], ids=["grid-of-ten-million", "loop-of-a-billion"])
def test_hostile_launch_is_refused_in_one_line(tmp_path, monkeypatch, factory, message):
    monkeypatch.delenv(bounds.MAX_OPS_ENV, raising=False)
    monkeypatch.setenv(bounds.MAX_PROGRAMS_ENV, "100_000_000")  # the op bound's projection
    out = tmp_path / "h.ktrace"
    res = _cli("record", f"{__name__}:{factory}", "-o", str(out))
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output
    assert re.fullmatch(rf"kernbench: RecordLimitError: {message}; set KERNBENCH_MAX_OPS to "
                        r"raise the bound", lines[0]), lines[0]
    assert not out.exists()


def test_the_grid_of_ten_million_is_refused_as_a_whole_process(tmp_path, monkeypatch):
    monkeypatch.delenv(bounds.MAX_OPS_ENV, raising=False)
    monkeypatch.setenv(bounds.MAX_PROGRAMS_ENV, "100_000_000")  # the op bound's projection
    out = tmp_path / "h.ktrace"
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli", "record",
                           f"{__name__}:wide_add_grid", "-o", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("kernbench: RecordLimitError: launch refused: its first "
                                  "program recorded 4 ops")
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("kind", ["masked-add", "early-return"])
def test_a_grid_of_ten_million_programs_that_do_nothing_is_refused_before_any_runs(
        tmp_path, monkeypatch, kind):
    from kernbench.record import recorder

    monkeypatch.delenv(bounds.MAX_OPS_ENV, raising=False)
    monkeypatch.delenv(bounds.MAX_PROGRAMS_ENV, raising=False)
    ran: list[int] = []
    counted = recorder.counted

    def counting(run, bound):  # every program's body goes through here
        body = counted(run, bound)
        return lambda: (ran.append(1), body())[1]

    monkeypatch.setattr(recorder, "counted", counting)
    out = tmp_path / "n.ktrace"
    res = _cli("record", f"{__name__}:nothing_grid", "-p", f"kind={kind}", "-o", str(out))
    assert res.exit_code == 2 and not out.exists(), res.output
    assert res.output.strip() == (
        "kernbench: RecordLimitError: launch refused: the grid [10000000] has 10,000,000 "
        "programs, more than KERNBENCH_MAX_PROGRAMS=1,000,000 allows (each program runs the "
        "kernel's body while recording, even one that records nothing); set "
        "KERNBENCH_MAX_PROGRAMS to raise the bound")
    assert ran == []  # refused before any program ran ...
    res = _cli("record", f"{__name__}:nothing_grid", "-p", f"kind={kind}", "-p",
               "programs=3", "-o", str(out), "--hw", "ahbm-v1")
    assert res.exit_code == 0 and len(ran) == 3, res.output  # ... where 3 programs run


def test_a_loop_nest_counts_the_loops_around_it(tmp_path, monkeypatch):
    monkeypatch.setenv(bounds.MAX_OPS_ENV, "1999")  # 2 programs x 10 x 100 iterations
    with pytest.raises(RecordLimitError, match=rf"^{HERE}:\d+: launch refused: a loop of 100 "
                                               r"iterations inside loops of 10 iterations in "
                                               r"each of 2 programs is 2,000 iterations"):
        kb.record(_nest(10, 100), tmp_path / "a.ktrace")
    assert bounds._NESTS == {}  # the refused nest left no state behind
    monkeypatch.setenv(bounds.MAX_OPS_ENV, "2000")
    trace = kb.record(_nest(10, 100), tmp_path / "b.ktrace")
    assert trace.n_ops == 4 and bounds._NESTS == {}  # a fill and a store per program


def test_a_refusal_inside_a_loop_leaves_no_loop_state(tmp_path, monkeypatch):
    from kernbench.record.recorder import layout, run_programs
    from kernbench.record.rows.writer import OpWriter
    from kernbench.trace.hw import load_hw

    case = long_loop(trips=100)  # (its dry run, under the default bound)
    monkeypatch.setenv(bounds.MAX_OPS_ENV, "150")  # 100 iterations pass; ~200 ops do not
    writer = OpWriter(tmp_path / "ops.parquet", batch_rows=64)
    try:
        with pytest.raises(RecordLimitError, match=r"^recording stopped: 192 ops recorded"
                                                   ) as info:
            run_programs(case, load_hw("ahbm-v1"), writer, layout(case))
    finally:
        writer.abort()
    assert info.value.__traceback__ is not None  # the frames are still held ...
    assert bounds._NESTS == {}  # ... and still no nest is left for a later program
