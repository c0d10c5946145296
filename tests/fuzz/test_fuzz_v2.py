"""The version-2 fuzz suite (issue 27): every hostile kind of ``corrupt_v2`` x every command
that reads a trace (replay, replay --case, check, report, export, sql, diff), in process
(click's CliRunner; replay through its process entry point). Each run exits 0/1 honestly or
2 with one line, never a traceback; a ``bad`` kind is refused by every command; no recorded
file changes. The memory bombs run in children under ``resource`` limits with
``KERNBENCH_MAX_MEMORY_GB=1``: refused with one line, peak RSS under the budget + 300 MB
(a child still running after 30 s of CPU or wall time is ended: a hang guard, not a check).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench.cli import main
from kernbench.replay.__main__ import main as replay_main

from .corrupt_v2 import BOMBS, KINDS, STALE, base_case, make
from .test_fuzz import assert_honest, snapshot

CASE = "tests.fuzz.corrupt_v2:base_case"
QUERY = "SELECT name, count(*) AS n FROM ops GROUP BY name ORDER BY name"
COMMANDS = ("check", "report", "export", "sql", "diff", "replay", "replay --case")
GIB = 1 << 30
BUDGET_GB = 1
RSS_SLACK = 300 << 20
TIME_CAP_S = 30  # ends a runaway child; not asserted (speed is the bench's)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("v2") / "base.ktrace"
    kb.record(base_case(), out=path)
    return path


def run(cmd: str, trace: Path, base: Path, out: Path) -> tuple[int, str, str]:
    if cmd.startswith("replay"):
        args = [str(trace), *(["--case", CASE] if cmd == "replay --case" else [])]
        so, se = io.StringIO(), io.StringIO()
        try:
            with redirect_stdout(so), redirect_stderr(se):
                code = replay_main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - any escape is the failure we look for
            pytest.fail(f"{cmd} raised on {trace.name}:\n"
                        + "".join(traceback.format_exception(exc)))
        return code, so.getvalue(), se.getvalue()
    args = {"check": ["check", str(trace)], "report": ["report", str(trace)],
            "export": ["export", str(trace), "-o", str(out / "timeline.json")],
            "sql": ["sql", str(trace), QUERY], "diff": ["diff", str(trace), str(base)]}[cmd]
    r = CliRunner().invoke(main, args)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        pytest.fail(f"kernbench {cmd} raised on {trace.name}:\n"
                    + "".join(traceback.format_exception(r.exception)))
    return r.exit_code, r.stdout, r.stderr


def test_v2_base_trace_passes_every_command_and_replays_verified(base: Path, tmp_path: Path
                                                                 ) -> None:
    assert kb.Trace.open(base).manifest["schema_version"] == 2
    for cmd in COMMANDS:
        code, out, err = run(cmd, base, base, tmp_path)
        assert code == 0, (cmd, out, err)
    code, out, _ = run("replay --case", base, base, tmp_path)
    assert out.startswith("verified") and "max_abs_err=0" in out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_v2_hostile_kind_is_honest_in_every_command(kind: str, base: Path, tmp_path: Path
                                                    ) -> None:
    edit, bad = KINDS[kind]
    trace = make(edit, base, tmp_path / f"{kind}.ktrace")
    before = snapshot(trace)
    for cmd in COMMANDS:
        code, out, err = run(cmd, trace, base, tmp_path)
        assert_honest(cmd, kind, bad, code, out, err)
        if cmd.startswith("replay"):  # replay writes replay/ only
            assert snapshot(trace, skip_replay=True) == {
                k: v for k, v in before.items() if k.split("/")[0] != "replay"}, cmd
            before = snapshot(trace)
        else:
            assert snapshot(trace) == before, f"{cmd} changed files of {kind}"
        if bad:
            assert "verified" not in out, (cmd, out)


def test_v2_stale_kinds_say_their_replay_is_not_the_trace(base: Path, tmp_path: Path) -> None:
    """The corpus's stale replay/ kinds: diff says so (tests/replay/test_stale_replay.py
    checks every reader on a version-1 trace)."""
    for kind in STALE:
        trace = make(KINDS[kind][0], base, tmp_path / f"{kind}.ktrace")
        code, out, err = run("diff", trace, base, tmp_path)
        assert code in (0, 1) and "not this trace's replay" in err and "not compared" in out


# -- memory bombs: children under resource limits ------------------------------------------------
#: runs ``python -m MODULE ARGS`` under the limits and writes its own peak RSS (``VmHWM``:
#: ru_maxrss would count the forking test process too, ADR-0502) to ``KB_HWM_FILE``
CHILD = """
import atexit, os, resource, runpy, sys
def hwm():
    with open("/proc/self/status") as f, open(os.environ["KB_HWM_FILE"], "w") as out:
        out.write(next(ln for ln in f if ln.startswith("VmHWM:")).split()[1])
atexit.register(hwm)
cap = int(os.environ["KB_AS_CAP"])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
resource.setrlimit(resource.RLIMIT_CPU, (int(os.environ["KB_CPU_CAP"]),) * 2)
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def run_measured(tmp: Path, *args: str, script: str = CHILD) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, the child's peak RSS in bytes). The CPU limit and the
    timeout only end a runaway child: speed is the bench's to measure, not a test's."""
    hwm = tmp / "hwm"
    env = {**os.environ, "KERNBENCH_MAX_MEMORY_GB": str(BUDGET_GB), "POLARS_MAX_THREADS": "2",
           "ARROW_DEFAULT_MEMORY_POOL": "system", "KB_HWM_FILE": str(hwm),
           "KB_AS_CAP": str(4 * GIB), "KB_CPU_CAP": str(TIME_CAP_S)}
    p = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                       env=env, timeout=TIME_CAP_S)
    return p.returncode, p.stdout, p.stderr, int(hwm.read_text()) * 1024


@pytest.fixture(scope="module")
def bombs(base: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bombs")
    return {name: make(edit, base, root / f"{name}.ktrace") for name, edit in BOMBS.items()}


@pytest.mark.parametrize("entry", [("kernbench.cli", "check"), ("kernbench.replay",)],
                         ids=["check", "replay"])
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_v2_memory_bomb_refused_under_budget(bombs: dict[str, Path], bomb: str,
                                             entry: tuple[str, ...], tmp_path: Path) -> None:
    code, out, err, rss = run_measured(tmp_path, *entry, str(bombs[bomb]))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[-800:]
    assert "over the 1 GiB limit" in lines[0], lines[0]
    assert rss < BUDGET_GB * GIB + RSS_SLACK, f"peak RSS {rss / GIB:.2f} GiB"
    print(f"{bomb} {entry[-1]}: peak RSS {rss / (1 << 20):.0f} MB")


#: the other commands, all in one child per bomb (one process start): each one's exit code
#: and stderr, then the child's peak RSS over all of them
MANY = """
import contextlib, io, json, sys
from kernbench.cli import main
from kernbench.replay.__main__ import main as replay_main
results = []
for args in json.loads(sys.argv[0]):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = replay_main(args[1:]) if args[0] == "replay" else main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    results.append([code, err.getvalue()])
print(json.dumps(results))
"""


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_v2_memory_bomb_refused_under_budget_by_every_other_command(
        bombs: dict[str, Path], bomb: str, base: Path, tmp_path: Path) -> None:
    trace = str(bombs[bomb])
    commands = [["report", trace], ["export", trace, "-o", str(tmp_path / "t.json")],
                ["sql", trace, QUERY], ["diff", trace, str(base)],
                ["replay", trace, "--case", CASE]]
    script = CHILD.replace("runpy.run_module(sys.argv[0], run_name=\"__main__\", alter_sys=True)",
                           MANY)
    code, out, err, rss = run_measured(tmp_path, json.dumps(commands), script=script)
    assert code == 0, err[-800:]
    for args, (c, e) in zip(commands, json.loads(out.strip().splitlines()[-1]), strict=True):
        lines = [ln for ln in e.splitlines() if ln.strip()]
        assert c == 2 and len(lines) == 1 and "Traceback" not in e, (args[0], e[-800:])
        assert "over the 1 GiB limit" in lines[0], (args[0], lines[0])
    assert rss < BUDGET_GB * GIB + RSS_SLACK, f"peak RSS {rss / GIB:.2f} GiB"
    print(f"{bomb} report/export/sql/diff/replay --case: peak RSS {rss / (1 << 20):.0f} MB")
