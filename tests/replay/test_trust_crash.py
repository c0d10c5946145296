"""Trust point 1: a replay reports only the verdict of the run that just happened; a crashed,
killed or orphaned replay child is one line and a non-zero exit, never an old verdict.

The crashes come from user code that legitimately runs in the replay child — a ``--case``
factory's reference that kills its own process, exits, or raises a BaseException — so no
test-only hook ships in kernbench.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.replay.usercases import import_user_module

import kernbench as kb
from kernbench.cli import main
from kernbench.errors import ReplayError
from kernbench.replay import replay
from kernbench.replay.child import interpret
from kernbench.replay.session import new_run_id


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A recorded user trace (``mycases.double_case``, default rows) and its module's folder."""
    folder = tmp_path / "cases"
    mycases = import_user_module(folder, monkeypatch)
    trace = tmp_path / "d.ktrace"
    kb.record(mycases.double_case(n=256, tile=64), trace)
    yield trace, folder
    sys.modules.pop("mycases", None)


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def _verdict_bytes(trace: Path) -> bytes:
    return (trace / "replay" / "verdict.json").read_bytes()


def test_trust_1_every_replay_writes_its_own_run_id(user) -> None:
    trace, _ = user
    a = replay(trace, case="mycases:double_case")
    b = replay(trace, case="mycases:double_case")
    assert a.verified and b.verified
    assert re.fullmatch(r"[0-9a-f]{32}", a.verdict["run_id"])
    assert a.verdict["run_id"] != b.verdict["run_id"]
    assert b"\"run_id\": \"%s\"" % b.verdict["run_id"].encode() in _verdict_bytes(trace)


def test_trust_1_a_verdict_of_an_earlier_run_is_never_reported(user) -> None:
    trace, _ = user
    replay(trace, case="mycases:double_case")
    with pytest.raises(ReplayError, match="from an earlier replay; not reporting it"):
        interpret(trace, new_run_id(), 0, "")
    # wrong outputs next to a copied good replay/: the fresh run says WRONG
    res = _cli("replay", str(trace), "--case", "mycases:double_wrong")
    assert res.exit_code == 1 and res.output.startswith("WRONG: "), res.output


@pytest.mark.parametrize(("reference", "message"), [
    ("kill", r"the replay process was killed by SIGKILL; no verdict of this run"),
    ("exit0", r"wrote no verdict of this run .* from an earlier replay"),
    ("sys_exit", r"crashed \(exit 3\): kernbench replay: crash: SystemExit"),
    ("boom", r"crashed \(exit 3\): kernbench replay: crash: Boom: user code blew up"),
])
def test_trust_1_a_crashed_child_is_one_line_and_the_old_verdict_is_not_reported(
        user, reference: str, message: str) -> None:
    trace, _ = user
    good = _cli("replay", str(trace), "--case", "mycases:double_case")
    assert good.exit_code == 0 and good.output.startswith("verified: "), good.output
    before = _verdict_bytes(trace)
    res = _cli("replay", str(trace), "--case", f"mycases:double_{reference}")
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output
    assert lines[0].startswith("kernbench: ReplayError: ") and re.search(message, lines[0])
    assert "verified" not in res.output and "WRONG" not in res.output
    assert _verdict_bytes(trace) == before  # the old replay/ is untouched, and not reported


@pytest.mark.parametrize("reference", ["kill", "exit0"])
def test_trust_1_without_a_prior_replay_there_is_no_unreadable_verdict_message(
        user, reference: str) -> None:
    trace, _ = user
    with pytest.raises(ReplayError) as info:
        replay(trace, case=f"mycases:double_{reference}")
    assert "unreadable" not in str(info.value)
    assert "no verdict" in str(info.value)
    assert not (trace / "replay").exists()


def test_trust_1_an_unexpected_exception_exits_3_with_one_line(user) -> None:
    trace, folder = user
    proc = subprocess.run([sys.executable, "-m", "kernbench.replay", str(trace), "--case",
                           "mycases:double_boom", "--case-path", str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    assert proc.stderr.strip() == "kernbench replay: crash: Boom: user code blew up"
    assert proc.stdout == "" and not (trace / "replay").exists()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_trust_1_killing_the_parent_ends_the_child(user, tmp_path: Path) -> None:
    trace, folder = user
    pid_file = tmp_path / "child.pid"
    script = ("import sys, kernbench as kb; sys.path.insert(0, sys.argv[2]); "
              "kb.replay(sys.argv[1], case='mycases:double_sleep')")
    parent = subprocess.Popen([sys.executable, "-c", script, str(trace), str(folder)],
                              env=dict(os.environ, USERCASE_PID_FILE=str(pid_file)))
    try:
        deadline = time.monotonic() + 90
        while not pid_file.exists() or not pid_file.read_text():
            assert parent.poll() is None and time.monotonic() < deadline, "child never started"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the replay child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_trust_1_a_child_that_dies_with_exit_1_before_its_verdict_is_a_crash(user) -> None:
    trace, _ = user  # e.g. the interpreter failed to import something: traceback, exit 1
    err = "Traceback (most recent call last):\n  ...\nImportError: cannot import name 'x'\n"
    with pytest.raises(ReplayError, match=r"wrote no verdict .*missing\) \(exit 1: "
                                          r"ImportError: cannot import name 'x'\)"):
        interpret(trace, new_run_id(), 1, err)
