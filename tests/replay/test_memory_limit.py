"""A replay child refused memory is reported as such, not as "the replay process crashed"
(issue 27, point 7): a MemoryError under RLIMIT_AS says "out of memory" and the limit; a
SIGKILL (how an out-of-memory killer ends a process) says what it usually means."""

from __future__ import annotations

import functools
import resource
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench import tl
from kernbench.cli import main
from kernbench.errors import ReplayError
from kernbench.replay.child import interpret
from kernbench.replay.session import new_run_id

CAP = 3 << 30  # the child's address space: imports fit, an 8 GiB tensor does not


@kb.kernel
def touch(x, y, *, tile: int):
    tl.store(y, tl.load(x, (tile,), tl.float32) * 2.0)


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def test_replay_child_refused_memory_says_out_of_memory(tmp_path: Path, monkeypatch) -> None:
    case = kb.Case(name="big-zeros", kernel=touch, grid=(1,),
                   tensors={"x": kb.tensor((1 << 31,), "float32", init=kb.zeros()),
                            "y": kb.tensor((64,), "float32", role="output")},
                   params={"tile": 64})
    trace = kb.record(case, tmp_path / "big.ktrace").path
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", "64")  # past the budget: the cap refuses
    monkeypatch.setattr(subprocess, "Popen", functools.partial(subprocess.Popen,
                                                               preexec_fn=_cap))
    res = CliRunner().invoke(main, ["replay", str(trace)])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output
    assert lines[0].startswith("kernbench: ReplayError: the replay ran out of memory: an "
                               "allocation was refused (")
    assert "crashed" not in lines[0]
    if "MemoryError" in lines[0]:  # refused in Python (not in a native library's allocator)
        assert "(RLIMIT_AS 3 GiB)" in lines[0]
    assert not (trace / "replay").exists()


@pytest.mark.parametrize(("code", "stderr"), [
    (3, "kernbench replay: out of memory: MemoryError: Unable to allocate 4.00 GiB"),
    (-signal.SIGABRT, "terminate called after throwing an instance of 'std::bad_alloc'"),
    (-signal.SIGABRT, "memory allocation of 8388608 bytes failed\nstack backtrace:\nnote: "
                      "Some details are omitted"),
], ids=["python-memory-error", "c++-bad-alloc", "rust-allocation-failed"])
def test_a_child_whose_last_words_are_about_memory_is_out_of_memory(tmp_path, code,
                                                                     stderr) -> None:
    with pytest.raises(ReplayError, match=r"^the replay ran out of memory: an allocation was "
                                          r"refused \(.*\); no verdict of this run; give the "
                                          r"replay more memory"):
        interpret(tmp_path, new_run_id(), code, f"progress...\n{stderr}\n")


def test_a_sigkilled_child_names_the_out_of_memory_killer_and_its_peak(tmp_path) -> None:
    with pytest.raises(ReplayError, match=r"^the replay process was killed by SIGKILL; no "
                                          r"verdict of this run \(out of memory\? the kernel's "
                                          r"OOM killer .* its peak RSS 3 GiB; "):
        interpret(tmp_path, new_run_id(), -signal.SIGKILL, "", peak_rss=3 << 30)
    with pytest.raises(ReplayError, match=r"killed by SIGTERM; no verdict of this run$"):
        interpret(tmp_path, new_run_id(), -signal.SIGTERM, "", peak_rss=3 << 30)
