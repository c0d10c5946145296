"""The fuzz suite (issue 11 acceptance): every corruption kind x every command that reads a
trace, with the manifest hash left stale and re-stamped to match.

Each run must exit 0/1 with an honest verdict or 2 with one line on stderr, never a
traceback; a ``bad`` kind must be refused by every command; no recorded file may change
and nothing may be unpickled. Runs are in-process (click's CliRunner; replay through its
process entry point ``kernbench.replay.__main__.main``, ADR-0126); the memory- and
time-capped runs are in ``test_caps.py``.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernbench.cli import main
from kernbench.replay.__main__ import main as replay_main

from .corrupt import KINDS, MARKER, restamp

GOOD = Path(__file__).parents[2] / "traces" / "softmax.ktrace"
QUERY = "SELECT name, count(*) AS n FROM ops GROUP BY name ORDER BY name"
CLI_COMMANDS = ("check", "report", "export", "diff", "sql", "plot")


def snapshot(root: Path, skip_replay: bool = False) -> dict[str, str]:
    """Every path under ``root`` (symlinks not followed) with its content hash."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if skip_replay and rel.split("/")[0] == "replay":
            continue
        if p.is_symlink():
            out[rel] = f"link:{p.readlink()}"
        elif p.is_dir():
            out[rel] = "dir"
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[rel] = "other"
    return out


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("good") / "good.ktrace"
    shutil.copytree(GOOD, dst)
    return dst


def run_cli(cmd: str, trace: Path, good: Path, out: Path) -> tuple[int, str, str]:
    args = {"check": ["check", str(trace)], "report": ["report", str(trace)],
            "export": ["export", str(trace), "-o", str(out / "timeline.json")],
            "diff": ["diff", str(trace), str(good)], "sql": ["sql", str(trace), QUERY],
            "plot": ["plot", str(trace), "-o", str(out / "picture.png")]}[cmd]
    r = CliRunner().invoke(main, args)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        tb = "".join(traceback.format_exception(r.exception))
        pytest.fail(f"kernbench {cmd} raised on {trace.name}:\n{tb}")
    return r.exit_code, r.stdout, r.stderr


def run_replay(trace: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = replay_main([str(trace)])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException as exc:  # noqa: BLE001 - any escape is the failure we look for
        pytest.fail(f"replay raised on {trace.name}:\n{''.join(traceback.format_exception(exc))}")
    return code, out.getvalue(), err.getvalue()


def assert_honest(cmd: str, kind: str, bad: bool, code: int, stdout: str, stderr: str) -> None:
    where = f"{cmd} on {kind}: exit {code}\nstdout: {stdout[-400:]}\nstderr: {stderr[-400:]}"
    assert code in (0, 1, 2), where
    assert "Traceback" not in stdout + stderr, where
    errors = [ln for ln in stderr.splitlines()
              if ln.strip() and not ln.startswith("kernbench: warning:")]
    if code == 2:
        assert len(errors) == 1, where
    if bad:
        assert code == 2 or (cmd == "check" and code == 1), where
        if cmd == "check" and code == 1:
            assert "FAIL" in stdout, where


@pytest.fixture
def make(tmp_path: Path):
    made: list[Path] = []

    def build(kind: str, stamp: bool) -> Path:
        dst = tmp_path / f"{kind}.ktrace"
        shutil.copytree(GOOD, dst)
        KINDS[kind][0](dst)
        if stamp:
            restamp(dst)
        made.append(dst)
        return dst

    yield build
    for d in made:  # undo chattr +i / read-only so the temporary folder can be removed
        subprocess.run(["chattr", "-R", "-i", str(d)], capture_output=True, check=False)
        for p in [d, *d.rglob("*")]:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.mark.parametrize("stamp", [False, True], ids=["hash-stale", "hash-updated"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fuzz_every_command_is_honest(kind: str, stamp: bool, make, good: Path,
                                      tmp_path: Path) -> None:
    MARKER.unlink(missing_ok=True)
    trace = make(kind, stamp)
    bad = KINDS[kind][1]
    before = snapshot(trace)
    for cmd in CLI_COMMANDS:
        code, out, err = run_cli(cmd, trace, good, tmp_path)
        assert_honest(cmd, kind, bad, code, out, err)
        assert snapshot(trace) == before, f"{cmd} changed files of {kind}"
    code, out, err = run_replay(trace)
    assert_honest("replay", kind, bad, code, out, err)
    assert snapshot(trace, skip_replay=True) == {
        k: v for k, v in before.items() if k.split("/")[0] != "replay"}
    assert not MARKER.exists(), f"something unpickled the metadata of {kind}"


def test_fuzz_has_forty_kinds_and_a_clean_baseline(good: Path, tmp_path: Path) -> None:
    """At least 40 kinds, and the uncorrupted trace passes every command (exit 0)."""
    assert len(KINDS) >= 40 and sum(bad for _, bad in KINDS.values()) >= 40
    for cmd in CLI_COMMANDS:
        code, out, err = run_cli(cmd, good, good, tmp_path)
        assert code == 0, (cmd, out, err)
    code, out, err = run_replay(good)
    assert code == 0 and out.startswith("verified"), (out, err)
