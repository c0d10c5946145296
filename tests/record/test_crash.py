"""Record killed (SIGKILL) at several points: the target is always the old trace or the new
one, whole and verified, never missing or half; the next record cleans what was left.

Each run is a subprocess recording the case ``new`` over a trace of the case ``old``; it
kills itself inside the kernel or around a step of ``kernbench.trace.atomic`` (by wrapping that
step), or the test kills it after a delay.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import kernbench as kb
from kernbench.trace import Trace

SCRIPT = r'''
import os, signal, sys
import kernbench as kb
import kernbench.trace.atomic as A
from kernbench import tl

out, name, point, step, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def wrap(owner, attr, when):
    real, calls = getattr(owner, attr), [0]

    def wrapped(*a, **k):
        calls[0] += 1
        if when == "before" and calls[0] == n:
            die()
        result = real(*a, **k)
        if when == "after" and calls[0] == n:
            die()
        return result
    setattr(owner, attr, wrapped)


@kb.kernel
def k(x, y, *, iters: int, kill_at: int):
    for i in range(iters):
        if i == kill_at:
            die()
        with tl.scratch_scope():
            tl.store(y, tl.exp(tl.load(x, (64,), tl.float32)))


iters, kill_at = 20, -1
if point == "kernel":
    kill_at = n
elif point == "slow":
    iters = n
elif point == "fallback":  # no atomic exchange on this system: two renames
    A._exchange = lambda a, b: False
    wrap(os, "rename", "after")
elif point in ("before", "after"):
    wrap(A, step, point)
case = kb.Case(name, k, (2,), {"x": kb.tensor((64,), "float32", init=kb.randn(seed=0)),
                               "y": kb.tensor((64,), "float32", role="output")},
               {"iters": iters, "kill_at": kill_at})
kb.record(case, out)
'''


def run(tmp_path: Path, out: Path, name: str, point: str, step: str = "-", n: int = 1,
        kill: Callable[[subprocess.Popen], None] | None = None) -> int:
    script = tmp_path / "crash_record.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, "-I", str(script), str(out), name, point, step,
                             str(n)], stderr=subprocess.PIPE, text=True)
    if kill is not None:
        kill(proc)
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, -signal.SIGKILL), err
    return proc.returncode


def case_at(out: Path) -> str:
    """The case of the whole, verified trace at ``out``."""
    return Trace.open(out, verify=True).manifest["case"]


def hidden(parent: Path) -> list[str]:
    return sorted(n for n in os.listdir(parent) if n.startswith("."))


@pytest.fixture
def old(tmp_path: Path) -> Path:
    out = tmp_path / "traces" / "t.ktrace"
    assert run(tmp_path, out, "old", "none") == 0
    assert case_at(out) == "old"
    return out


@pytest.mark.parametrize("point,step,n,expect", [
    ("kernel", "-", 3, "old"),           # mid-recording: the temporary is half written
    ("before", "locked", 2, "old"),      # recorded, before taking the lock for the swap
    ("before", "_swap", 1, "old"),       # lock held, nothing swapped yet
    ("after", "_exchange", 1, "new"),    # swapped; the old trace not yet deleted
    ("before", "_rmtree", 1, "new"),     # swapped; deleting the old trace
    ("after", "_swap", 1, "new"),        # done, lock not yet released
])
def test_trust_13_record_killed_leaves_the_old_or_the_new_trace(tmp_path, old, point, step, n,
                                                                expect):
    assert run(tmp_path, old, "new", point, step, n) == -signal.SIGKILL
    assert case_at(old) == expect
    # the next record cleans up after the dead one and replaces the trace as usual
    assert run(tmp_path, old, "next", "none") == 0
    assert case_at(old) == "next"
    assert hidden(old.parent) == []


def after_temporary(out: Path, delay: float, complete: bool = False):
    """A killer: once the recording's temporary exists (holds a manifest if ``complete``),
    wait ``delay`` seconds."""
    def kill(proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            tmps = list(out.parent.glob(f".{out.name}.tmp-{proc.pid}-*"))
            if tmps and (not complete or any((t / "manifest.json").exists() for t in tmps)):
                break
            time.sleep(0.002)
        time.sleep(delay)
    return kill


def test_trust_13_record_killed_at_timed_moments_never_leaves_a_half_trace(tmp_path, old):
    for i, (delay, complete) in enumerate([(0.0, False), (0.3, False), (0.0, True)]):
        name = f"new{i}"
        run(tmp_path, old, name, "slow", n=6000, kill=after_temporary(old, delay, complete))
        assert case_at(old) in ("old", name)
        run(tmp_path, old, "old", "none")  # (the next one cleans up)
        assert hidden(old.parent) == []


def test_trust_13_without_atomic_exchange_a_kill_between_renames_is_restored(tmp_path, old):
    """Fallback path (no renameat2): killed after ``out -> .old``: ``out`` is missing until
    the next write to it (even a failing one) puts the old trace back."""
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    assert run(tmp_path, old, "new", "fallback", n=1) == -signal.SIGKILL
    assert not old.exists()
    (stash,) = [old.parent / h for h in hidden(old.parent) if ".old-" in h]
    assert {p.name: p.read_bytes() for p in stash.iterdir()} == before
    assert run(tmp_path, old, "new", "kernel", n=0) == -signal.SIGKILL  # restores, then dies
    assert case_at(old) == "old"
    assert run(tmp_path, old, "next", "none") == 0 and hidden(old.parent) == []
    assert isinstance(kb.Trace.open(old), kb.Trace)
