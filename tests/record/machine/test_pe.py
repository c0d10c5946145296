"""The PE driver: program -> PE mapping, sequential programs, auto-wait, scope drains."""

from __future__ import annotations

import kernbench as kb
from kernbench import tl
from kernbench.trace.hw import HwConfig
from tests.conftest import rows


@kb.kernel
def touch(x):
    pid = tl.program_id(0)
    tl.store(x + pid, tl.full((1,), float(pid), tl.float32))


def test_program_p_runs_on_pe_p_mod_n_pe(rec):
    trace = rec(touch, {"x": kb.tensor((20,), "float32", role="output")}, grid=(20,))
    for r in rows(trace, "fill"):
        assert r["pe"] == r["program"] % 8


def test_programs_on_one_pe_run_one_after_another(rec):
    trace = rec(touch, {"x": kb.tensor((3,), "float32", role="output")}, grid=(3,),
                hw=HwConfig(n_pe=1))
    by_program: dict[int, list[dict]] = {}
    for r in rows(trace):
        by_program.setdefault(r["program"], []).append(r)
    for p in (1, 2):
        assert min(r["t_issue_ps"] for r in by_program[p]) >= max(
            r["t_end_ps"] for r in by_program[p - 1])
    assert [r["seq"] for r in rows(trace)] == list(range(len(rows(trace))))


def test_program_ids_unravel_a_multi_axis_grid(rec):
    seen = []

    @kb.kernel
    def ids(x):
        seen.append((tl.program_id(0), tl.program_id(1), tl.num_programs(0), tl.num_programs(1)))

    rec(ids, {"x": kb.tensor((1,), "float32")}, grid=(2, 3))
    assert sorted(seen) == sorted((i, j, 2, 3) for i in range(2) for j in range(3))


def test_scratch_cursor_resets_at_each_program_start(rec):
    trace = rec(touch, {"x": kb.tensor((2,), "float32", role="output")}, grid=(2,),
                hw=HwConfig(n_pe=1))
    fills = rows(trace, "fill")
    assert [f["output"]["addr"] for f in fills] == [0, 0]


def test_consumer_waits_for_pending_load_and_records_the_stall(rec):
    @kb.kernel
    def load_use(x):
        a = tl.load(x, (256,), tl.float32)
        tl.exp(a)

    trace = rec(load_use, {"x": kb.tensor((256,), "float32")})
    (ld,) = rows(trace, "dma_read")
    (ex,) = rows(trace, "exp")
    assert ld["t_issue_ps"] == 0
    assert ex["wait_ps"] == ld["t_end_ps"]
    assert ex["t_issue_ps"] == ex["t_start_ps"] == ld["t_end_ps"]
