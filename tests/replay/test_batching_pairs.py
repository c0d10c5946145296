"""Two classes of op taking turns (replay/batching.py ``pairs``): each PE's next op starts
with another PE's store, so the stores and the ops batch apart, as one joint unit whose
values are all computed before any is written. Nothing about a replay can tell."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.replay.conftest import op, operand, write_trace
from tests.replay.test_batching import _both, _files

from kernbench.replay import batching, engine
from kernbench.replay.session import replay_in_process
from kernbench.schemas.ops import Op

X = (np.arange(1, 25, dtype=np.float32) - 12) / 8


def _turns(tmp_path: Path, programs: int, same_target: bool = False) -> Path:
    """Per PE i, at one start time: exp of x[4i:4i+4] into y, then abs of x into z, op ids
    taking turns exp, abs, exp, abs, ...; ``same_target``: every abs writes z[0:4]."""
    hbm = lambda addr: operand("hbm", addr, (4,))  # noqa: E731
    rows = []
    for i in range(programs):
        rows.append(op(Op.EXP, 0, 10, [hbm(16 * i)], hbm(4096 + 16 * i), pe=i))
        rows.append(op(Op.ABS, 0, 10 + i, [hbm(16 * i)],
                       hbm(8192 + (0 if same_target else 16 * i)), pe=i))
    return write_trace(tmp_path / "t.ktrace", rows, {
        "x": (X, "input"), "y": (np.zeros(24, np.float32), "output"),
        "z": (np.zeros(24, np.float32), "output")})


def _joints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Members of each joint unit made (the list fills during replays)."""
    sizes: list[int] = []
    units = batching.units

    def counting(*args, **kwargs):
        got = units(*args, **kwargs)
        sizes.extend(len(u.members) for u in got if isinstance(u.batch, batching.Joint))
        return got

    monkeypatch.setattr(batching, "units", counting)
    return sizes


@pytest.mark.parametrize("programs", [2, 5])
def test_turns_of_two_classes_batch_jointly_and_replay_the_same_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, programs: int) -> None:
    sizes = _joints(monkeypatch)
    _, off, on = _both(_turns(tmp_path, programs), monkeypatch)
    assert on == off and off["verdict"]["ok"]
    assert sizes == [2 * programs]  # with batching on: one joint unit of every op
    n = 4 * programs
    np.testing.assert_array_equal(np.frombuffer(on["outputs"]["y"], np.float32)[:n],
                                  np.exp(X[:n]))
    np.testing.assert_array_equal(np.frombuffer(on["outputs"]["z"], np.float32)[:n],
                                  np.abs(X[:n]))


def test_a_failing_joint_call_runs_every_member_one_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is written before every part's value exists: the fallback runs the
    members in replay order once each."""
    path = _turns(tmp_path, 4)
    _, off, _ = _both(path, monkeypatch)
    calls = []

    def fail(self):
        calls.append(self)
        if len(calls) == 2:  # the second part: the first part's value exists already
            raise ValueError("batched call refused")
        return call(self)

    call = batching.Batch.__call__
    monkeypatch.setattr(batching.Batch, "__call__", fail)
    monkeypatch.setattr(engine, "BATCH", True)
    res = replay_in_process(path, reference=False, threads=1, progress=False)
    assert len(calls) == 2 and res.ok
    assert _files(path) == off["files"]


def test_members_writing_the_same_bytes_do_not_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every abs writes z[0:4], landing in end-time order: the last program's value stays."""
    sizes = _joints(monkeypatch)
    _, off, on = _both(_turns(tmp_path, 3, same_target=True), monkeypatch)
    assert on == off and sizes == []
    np.testing.assert_array_equal(np.frombuffer(on["outputs"]["z"], np.float32)[:4],
                                  np.abs(X[8:12]))


def test_pairs_take_turns_across_idle_positions_and_stop_at_landings_chunks_and_taken(
        ) -> None:
    #              0  1  2   3  4  5  6  7  8  9 10 11 12 13 14 15
    cls = np.array([4, 6, 4, -2, 6, 4, 6, 1, 1, 3, 5, 3, 5, 3, 5, 7])
    landing = np.zeros(len(cls), bool)
    taken = np.zeros(len(cls), bool)
    taken[[7, 8]] = True  # a run of one class (``runs``) between the two
    got = batching.pairs(cls, landing, taken, chunk=64)
    assert got == [(0, 7, [0, 2, 5], [1, 4, 6]), (9, 15, [9, 11, 13], [10, 12, 14])]
    landing[14] = True  # writes land after the last member: the run still batches
    assert batching.pairs(cls, landing, taken, chunk=64) == got
    landing[11] = True  # a write lands after 11: neither 12 nor 13 may join the run
    assert batching.pairs(cls, landing, taken, chunk=64) == got[:1]
    no_landing = np.zeros(len(cls), bool)
    assert batching.pairs(cls, no_landing, taken, chunk=8) == got
    # chunks of 4: no class has two members inside one chunk in a run of turns
    assert batching.pairs(cls, no_landing, taken, chunk=4) == []
    assert batching.pairs(cls, no_landing, np.ones(len(cls), bool), chunk=64) == []


@pytest.mark.parametrize("at", [(0, 1, 2, 3), (0, 1, 3, 7)])
def test_0d_operands_batch_and_broadcast_per_member(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: tuple[int, ...]) -> None:
    """x[4i:4i+4] - s[at[i]] on PE i, s[at[i]] a 0-d operand: evenly spaced scalars are
    one strided view, others are gathered; each member's scalar meets its own row."""
    rows = [op(Op.SUB, 0, 10, [operand("hbm", 16 * i, (4,)),
                               operand("hbm", 4096 + 4 * at[i], ())],
               operand("hbm", 8192 + 16 * i, (4,)), pe=i) for i in range(4)]
    s = np.arange(1, 9, dtype=np.float32) * 10
    path = write_trace(tmp_path / "t.ktrace", rows, {
        "x": (X[:16], "input"), "s": (s, "input"), "y": (np.zeros(16, np.float32), "output")})
    made, off, on = _both(path, monkeypatch)
    assert on == off and off["verdict"]["ok"] and made == [4]
    want = X[:16].reshape(4, 4) - s[list(at)][:, None]
    np.testing.assert_array_equal(np.frombuffer(on["outputs"]["y"], np.float32),
                                  want.reshape(-1))
