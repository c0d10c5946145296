"""Time-faithful replay: inputs read at t_start, outputs visible at t_end, writes before reads
at equal times, ties by op_id; a read that overtakes its producer is never silent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import rewrite_ops
from tests.replay.conftest import op, operand, write_trace

import kernbench as kb
from kernbench import tl
from kernbench.replay import ReplayResult, replay
from kernbench.schemas.ops import Op

X = np.arange(1, 9, dtype=np.float32)


def hbm_x(start: int = 0, n: int = 4) -> dict:
    return operand("hbm", start * 4, (n,))


def hbm_y(start: int = 0, n: int = 4) -> dict:
    return operand("hbm", 4096 + start * 4, (n,))


def tcm(addr: int, n: int = 4) -> dict:
    return operand("tcm", addr, (n,))


def run(tmp_path: Path, ops: list[dict]) -> ReplayResult:
    path = write_trace(tmp_path / "t.ktrace", ops, {"x": (X, "input"),
                                                     "y": (np.zeros(8, np.float32), "output")})
    return replay(path, in_process=True)


def load_exp_store(exp_start: int) -> list[dict]:
    return [op(Op.DMA_READ, 0, 100, [hbm_x()], tcm(0)),
            op(Op.EXP, exp_start, exp_start + 10, [tcm(0)], tcm(64)),
            op(Op.DMA_WRITE, 200, 300, [tcm(64)], hbm_y())]


def test_a_read_after_its_producer_lands_sees_the_data(tmp_path: Path) -> None:
    res = run(tmp_path, load_exp_store(exp_start=150))
    assert res.status == "unverified"  # no invalid read; the synthetic trace has no reference
    np.testing.assert_allclose(res.outputs["y"][:4], np.exp(X[:4]))


def test_writes_land_before_reads_at_the_same_time(tmp_path: Path) -> None:
    res = run(tmp_path, load_exp_store(exp_start=100))
    assert res.status == "unverified"
    np.testing.assert_allclose(res.outputs["y"][:4], np.exp(X[:4]))


def test_a_read_before_its_producer_lands_is_an_invalid_read(tmp_path: Path) -> None:
    res = run(tmp_path, load_exp_store(exp_start=99))
    assert res.status == "failed"
    bad = res.verdict["invalid_read"]
    assert bad["op_id"] == 1 and bad["name"] == "exp" and bad["src"] == "synthetic.py:99"
    assert "input 0 tcm@pe0 [0, 16)" in bad["message"]
    assert "read of invalid bytes" in bad["message"]
    assert res.verdict["n_executed"] == 1


def test_a_read_while_an_overwrite_is_in_flight_sees_the_old_value(tmp_path: Path) -> None:
    ops = [op(Op.DMA_READ, 0, 100, [hbm_x(0)], tcm(0)),
           op(Op.DMA_READ, 100, 400, [hbm_x(4)], tcm(0)),
           op(Op.EXP, 200, 210, [tcm(0)], tcm(64)),
           op(Op.DMA_WRITE, 220, 300, [tcm(64)], hbm_y(0)),
           op(Op.EXP, 400, 410, [tcm(0)], tcm(128)),
           op(Op.DMA_WRITE, 420, 500, [tcm(128)], hbm_y(4))]
    y = run(tmp_path, ops).outputs["y"]
    np.testing.assert_allclose(y, np.exp(X))


def test_equal_end_times_commit_in_op_id_order(tmp_path: Path) -> None:
    ops = [op(Op.DMA_READ, 0, 100, [hbm_x(0)], tcm(0)),
           op(Op.DMA_READ, 50, 100, [hbm_x(4)], tcm(0)),
           op(Op.DMA_WRITE, 100, 200, [tcm(0)], hbm_y(0))]
    np.testing.assert_array_equal(run(tmp_path, ops).outputs["y"][:4], X[4:])


def test_ops_run_in_start_time_order_not_emission_order(tmp_path: Path) -> None:
    ops = [op(Op.DMA_WRITE, 300, 400, [tcm(0)], hbm_y(0)),
           op(Op.DMA_READ, 0, 100, [hbm_x(0)], tcm(0))]
    res = run(tmp_path, ops)
    assert res.status == "unverified"
    np.testing.assert_array_equal(res.outputs["y"][:4], X[:4])


def test_a_scope_exit_makes_the_rewound_bytes_unreadable(tmp_path: Path) -> None:
    ops = [op(Op.DMA_READ, 0, 100, [hbm_x()], tcm(0)),
           op(Op.SCOPE_EXIT, 150, 150, lo=0, hi=16),
           op(Op.DMA_WRITE, 200, 300, [tcm(0)], hbm_y())]
    bad = run(tmp_path, ops).verdict["invalid_read"]
    assert bad["op_id"] == 2 and "read of invalid bytes" in bad["message"]


def test_a_write_landing_after_a_scope_exit_is_valid_again(tmp_path: Path) -> None:
    ops = [op(Op.SCOPE_EXIT, 50, 50, lo=0, hi=64),
           op(Op.DMA_READ, 0, 100, [hbm_x()], tcm(0)),
           op(Op.DMA_WRITE, 200, 300, [tcm(0)], hbm_y())]
    assert run(tmp_path, ops).status == "unverified"  # no invalid read (no reference)


def test_a_failing_op_is_reported_when_replay_reaches_it(tmp_path: Path) -> None:
    ops = [op(Op.DMA_READ, 0, 100, [hbm_x()], tcm(0)),
           op(Op.ADD, 200, 210, [tcm(0), operand("tcm", 0, (2, 2))], tcm(64))]
    bad = run(tmp_path, ops).verdict["invalid_read"]
    assert bad["op_id"] == 1 and "Shape mismatch" in bad["message"]


def test_a_read_outside_the_tensors_is_reported_with_its_range(tmp_path: Path) -> None:
    ops = [op(Op.DMA_READ, 0, 100, [operand("hbm", 16, (8,))], tcm(0, 8))]
    bad = run(tmp_path, ops).verdict["invalid_read"]
    assert "hbm@pe0 [16, 48)" in bad["message"] and "not inside one region" in bad["message"]


# -- recorded traces, hand-edited so a read overtakes its producer -------------------------
def test_an_early_read_in_a_recorded_trace_is_an_invalid_read(copy_of) -> None:
    path = copy_of("scale-exp")

    def early(rows: list[dict]) -> None:
        loads = [r for r in rows if r["name"] == "dma_read"]
        consumer = next(r for r in rows if r["name"] == "mul" and r["pe"] == loads[1]["pe"]
                        and r["t_start_ps"] >= loads[1]["t_end_ps"])
        consumer["t_start_ps"] = loads[1]["t_end_ps"] - 1

    rewrite_ops(path, early)
    res = replay(path, in_process=True)
    assert res.status == "failed"
    assert res.verdict["invalid_read"]["name"] == "mul"
    assert "read of invalid bytes" in res.verdict["invalid_read"]["message"]


@kb.kernel
def double_buffered(x, y, *, n: int, tiles: int):
    buf = tl.zeros((n,), tl.float32)
    for j in range(tiles):
        tl.load(x + j * n, (n,), tl.float32, out=buf)
        tl.store(y + j * n, buf * 2.0)


def test_an_early_read_of_a_reused_buffer_is_wrong_data(tmp_path: Path) -> None:
    case = kb.Case("dbuf", double_buffered, (1,),
                   {"x": kb.tensor((4, 16), "float32", init=kb.randn(seed=5)),
                    "y": kb.tensor((4, 16), "float32", role="output")},
                   params={"n": 16, "tiles": 4}, reference=lambda x: {"y": x * 2})
    trace = kb.record(case, tmp_path / "d.ktrace")
    assert replay(trace.path, case=lambda: case, in_process=True).verified

    def early(rows: list[dict]) -> None:
        load = [r for r in rows if r["name"] == "dma_read"][2]
        mul = next(r for r in rows if r["name"] == "mul" and r["op_id"] > load["op_id"])
        mul["t_start_ps"] = load["t_start_ps"]

    rewrite_ops(trace.path, early)
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.verdict["invalid_read"] is None
    assert res.status == "wrong" and res.verdict["outputs"]["y"]["mismatches"] == 16


@pytest.mark.parametrize("case", ["scale-exp", "gemm", "softmax"])
def test_built_in_cases_replay_and_verify(copy_of, case: str) -> None:
    res = replay(copy_of(case), in_process=True)
    assert res.verified, res.verdict
    assert res.verdict["reference"] == f"registry:{case}"


def test_a_slow_write_lands_after_a_later_faster_one(tmp_path: Path) -> None:
    ops = [op(Op.DMA_READ, 0, 500, [hbm_x(0)], tcm(0)),
           op(Op.DMA_READ, 100, 200, [hbm_x(4)], tcm(0)),
           op(Op.DMA_WRITE, 300, 400, [tcm(0)], hbm_y(0)),
           op(Op.DMA_WRITE, 600, 700, [tcm(0)], hbm_y(4))]
    y = run(tmp_path, ops).outputs["y"]
    np.testing.assert_array_equal(y, np.concatenate([X[4:], X[:4]]))


def test_other_pes_work_does_not_let_a_write_land_early(tmp_path: Path) -> None:
    ops = [op(Op.DMA_READ, 0, 100, [hbm_x(0)], tcm(0)),
           op(Op.DMA_READ, 10, 20, [hbm_x(4)], tcm(0, 4) | {"pe": 1}, pe=1),
           op(Op.DMA_READ, 100, 900, [hbm_x(4)], tcm(0)),
           op(Op.DMA_WRITE, 30, 40, [tcm(0) | {"pe": 1}], hbm_y(4), pe=1),
           op(Op.DMA_WRITE, 500, 600, [tcm(0)], hbm_y(0))]
    y = run(tmp_path, ops).outputs["y"]
    np.testing.assert_array_equal(y, np.concatenate([X[:4], X[4:]]))
