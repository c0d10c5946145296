"""Warm replay workers (``kb.ReplayPool``, ADR-0570): a worker process replays trace after
trace, is replaced after ``max_traces`` or a crash, a crash is one error for its trace only,
and a verdict of another run is never reported; ``kernbench replay A B C`` replays through one
pool with a line each."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench.cli import main

CRASH_MODULE = '''\
import os, signal

def case(**params):
    os.kill(os.getpid(), signal.SIGKILL)  # the replay process dies under the trace
'''


def _copy(src: Path, dst: Path) -> Path:
    return Path(shutil.copytree(src, dst, ignore=shutil.ignore_patterns("replay")))


def _verdict(trace: Path) -> dict:
    return json.loads((trace / "replay" / "verdict.json").read_text())


def test_a_worker_replays_trace_after_trace_and_is_replaced_after_max_traces(recorded,
                                                                             tmp_path):
    a = _copy(recorded("scale-exp"), tmp_path / "a.ktrace")
    b = _copy(recorded("softmax"), tmp_path / "b.ktrace")
    with kb.ReplayPool(max_traces=2) as pool:
        first, second = pool.replay(a), pool.replay(b)
        assert pool.started == 1  # the second trace went to the same, warm process
        third = pool.replay(a)
        assert pool.started == 2  # two traces done: the worker was replaced
    for res in (first, second, third):
        assert res.verified, res.verdict
    # each result is its own run's verdict, read from that trace
    assert len({first.verdict["run_id"], second.verdict["run_id"], third.verdict["run_id"]}) == 3
    assert _verdict(a)["run_id"] == third.verdict["run_id"]
    expected = kb.replay(a, in_process=True).outputs["y"]
    assert (first.outputs["y"] == expected).all() and (third.outputs["y"] == expected).all()


def test_a_crash_is_one_error_for_its_trace_never_the_old_verdict(recorded, tmp_path,
                                                                   monkeypatch):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "crashing_case.py").write_text(CRASH_MODULE)
    monkeypatch.syspath_prepend(str(mods))
    a = _copy(recorded("scale-exp"), tmp_path / "a.ktrace")
    with kb.ReplayPool() as pool:
        old = pool.replay(a)
        assert old.verified
        with pytest.raises(kb.ReplayError, match=r"killed by SIGKILL; no verdict of this run"):
            pool.replay(a, case="crashing_case:case")
        assert _verdict(a)["run_id"] == old.verdict["run_id"]  # on disk, but not reported
        again = pool.replay(a)  # the next trace gets a fresh worker
        assert again.verified and again.verdict["run_id"] != old.verdict["run_id"]
        assert pool.started == 2


def test_replay_of_several_traces_prints_one_line_each_and_exits_nonzero_if_one_fails(
        recorded, tmp_path):
    a = _copy(recorded("scale-exp"), tmp_path / "a.ktrace")
    b = _copy(recorded("softmax"), tmp_path / "b.ktrace")
    res = CliRunner().invoke(main, ["replay", str(a), str(b)])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 0, res.output
    assert [ln.split(": ")[0] for ln in lines] == [str(a), str(b)]
    assert all(": verified: " in ln for ln in lines), lines
    bad = _copy(a, tmp_path / "bad.ktrace")
    with open(bad / "ops.parquet", "ab") as f:
        f.write(b"x")
    res = CliRunner().invoke(main, ["replay", str(a), str(bad), str(b)])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 3, res.output
    assert lines[1].startswith(f"{bad}: TraceFormatError: ") and "sha256" in lines[1]
    assert ": verified: " in lines[0] and ": verified: " in lines[2]


def test_assert_replay_ok_replays_on_the_sessions_warm_worker(recorded, tmp_path):
    from kernbench.testing import _session_pool, assert_replay_ok

    a = _copy(recorded("scale-exp"), tmp_path / "a.ktrace")
    b = _copy(recorded("softmax"), tmp_path / "b.ktrace")
    first = assert_replay_ok(a)
    started = _session_pool().started
    second = assert_replay_ok(b)
    assert _session_pool().started == started  # no new process for the second trace
    assert first.verdict["run_id"] == _verdict(a)["run_id"]
    assert second.verdict["run_id"] == _verdict(b)["run_id"]
