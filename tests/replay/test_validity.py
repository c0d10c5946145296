"""validity.plan decides before the run exactly what the per-byte valid map decides in it."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from tests.replay.conftest import op, operand, write_trace

from kernbench.replay import engine, replay, schedule, validity
from kernbench.schemas.ops import Op

X = np.arange(1, 17, dtype=np.float32)


def _program(rng: random.Random) -> list[dict]:
    """Random loads, copies, exps and stores over overlapping TCM ranges, with scope exits."""
    ops = []
    for _ in range(rng.randint(1, 12)):
        t0 = rng.randint(0, 60) * 10 if ops else 0
        t1 = t0 + rng.choice([0, 10, 20, 50, 100])
        n = rng.choice([4, 4, 4, 2])
        a, b = rng.randint(0, 2) * 16, rng.randint(0, 2) * 16 + rng.choice([0, 0, 8])
        kind = rng.choice([0, 0, 0, 0, 1, 1, 2, 2, 3, 4])
        if kind == 0:
            ops.append(op(Op.DMA_READ, t0, t1, [operand("hbm", 0, (n,))],
                          operand("tcm", a, (n,))))
        elif kind == 1:
            ops.append(op(Op.EXP, t0, t1, [operand("tcm", a, (n,))], operand("tcm", b, (n,))))
        elif kind == 2:
            ops.append(op(Op.DMA_WRITE, t0, t1, [operand("tcm", a, (n,))],
                          operand("hbm", 64, (n,))))
        elif kind == 3:
            ops.append(op(Op.SCOPE_EXIT, t0, t0, lo=a, hi=a + rng.choice([0, 8, 16])))
        else:
            ops.append(op(Op.COPY, t0, t1, [operand("tcm", a, (n,))], operand("tcm", b, (n,))))
    for k, o in enumerate(ops):
        o["op_id"] = k
    return ops


def _unplanned(*args: object) -> validity.Plan:
    p = validity.plan(*args)
    p.ok = False  # force the checking loop
    return p


@pytest.mark.parametrize("seed", range(80))
def test_the_plan_agrees_with_the_checking_loop(tmp_path: Path, seed: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _program(random.Random(seed))
    tensors = {"x": (X, "input"), "y": (np.zeros(16, np.float32), "output")}
    fast = replay(write_trace(tmp_path / "a.ktrace", ops, tensors), in_process=True)
    monkeypatch.setattr(engine, "plan", _unplanned)
    slow = replay(write_trace(tmp_path / "b.ktrace", ops, tensors), in_process=True)
    assert fast.verdict["invalid_read"] == slow.verdict["invalid_read"]
    assert fast.verdict["n_executed"] == slow.verdict["n_executed"]
    np.testing.assert_array_equal(fast.outputs["y"], slow.outputs["y"])


@pytest.mark.parametrize("seed", range(24))
def test_landing_writes_early_when_unobserved_changes_nothing(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _program(random.Random(1000 + seed))
    tensors = {"x": (X, "input"), "y": (np.zeros(16, np.float32), "output")}
    early = replay(write_trace(tmp_path / "a.ktrace", ops, tensors), in_process=True)
    monkeypatch.setattr(schedule, "_unobserved", lambda touch, out_mem, w, *_: w < 0)
    heap = replay(write_trace(tmp_path / "b.ktrace", ops, tensors), in_process=True)
    assert early.verdict["invalid_read"] == heap.verdict["invalid_read"]
    assert early.verdict["first_nonfinite"] == heap.verdict["first_nonfinite"]
    np.testing.assert_array_equal(early.outputs["y"], heap.outputs["y"])


def _values(path: Path) -> list[tuple]:
    import pyarrow.parquet as pq

    table = pq.read_table(path / "replay" / "values.parquet").sort_by("op_id")
    return list(zip(*(table.column(c).to_pylist() for c in ("op_id", "checksum")),
                    strict=True))


@pytest.mark.parametrize("seed", range(20))
def test_small_windows_replay_exactly_like_one_window(tmp_path: Path, seed: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows carry in-flight writes and valid maps across: any cut (windows of 1, 2 and 3
    rows) gives the same run as one window."""
    import importlib

    from kernbench.replay.session import replay_in_process

    if seed % 2:  # half of them through the streaming cursors
        monkeypatch.setattr(importlib.import_module("kernbench.replay.reader"),
                            "SMALL_FILE_ROWS", 0)

    ops = _program(random.Random(2000 + seed))
    tensors = {"x": (X, "input"), "y": (np.zeros(16, np.float32), "output")}
    whole = replay_in_process(write_trace(tmp_path / "a.ktrace", ops, tensors))
    cut_trace = write_trace(tmp_path / "b.ktrace", ops, tensors)
    for rows in (1, 2, 3):
        cut = replay_in_process(cut_trace, window_rows=rows)
        for key in ("invalid_read", "n_executed", "first_nonfinite"):
            assert cut.verdict[key] == whole.verdict[key], (rows, key)
        np.testing.assert_array_equal(cut.outputs["y"], whole.outputs["y"])
        assert _values(tmp_path / "b.ktrace") == _values(tmp_path / "a.ktrace"), rows
