"""Fixed costs of kernbench's own processes (ADR-0680): ``kernbench record`` run as its own
process and the replay child freeze what they imported before the user's module (the
collector never walks it again, during the run or at exit); the user's module and what it
makes stay collectable (its never-closed file is still flushed at exit), and a caller's own
process is left alone."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from kernbench.cli import main
from kernbench.replay.child import BOOT, PACKAGE_DIR

#: a user's case module that writes to a module-level file it never closes
USER_MODULE = textwrap.dedent("""
    import os

    import kernbench as kb
    from kernbench import tl

    # buffered and never closed (flushed when torn down), next to this module, one a process
    LOG = open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            f"factory-{os.getpid()}.log"), "w")

    @kb.kernel
    def double(x, y, *, n: int):
        tl.store(y, tl.load(x, (n,), tl.float32) * 2.0)

    def double_case(n: int = 16):
        LOG.write("built\\n")
        return kb.Case(name="double", kernel=double, grid=(1,),
                       tensors={"x": kb.tensor((n,), "float32", init=kb.randn(seed=0)),
                                "y": kb.tensor((n,), "float32", role="output")},
                       params={"n": n}, reference=lambda x: {"y": x * 2.0})
""")


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The loaded module names at each ``gc.freeze()`` meanwhile (nothing frozen for real)."""
    got: list[set[str]] = []
    monkeypatch.setattr(gc, "freeze", lambda: got.append(set(sys.modules)))
    return got


def test_record_as_its_own_process_freezes_its_imports_before_the_users_module(
        frozen, monkeypatch, tmp_path):
    (tmp_path / "user_double_own.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["kernbench", "record", "user_double_own:double_case",
                                      "-o", "d.ktrace"])
    with pytest.raises(SystemExit) as exc:
        main()  # what the ``kernbench`` script and ``python -m kernbench.cli`` call
    assert exc.value.code == 0 and (tmp_path / "d.ktrace" / "ops.parquet").is_file()
    assert len(frozen) == 1
    assert "kernbench.record.recorder" in frozen[0]
    assert "user_double_own" not in frozen[0] and "user_double_own" in sys.modules
    del sys.modules["user_double_own"]


def test_record_called_with_arguments_freezes_nothing(frozen, tmp_path):
    out = tmp_path / "s.ktrace"
    got = CliRunner().invoke(main, ["record", "scale-exp", "-p", "tile=1024", "-o", str(out)])
    assert got.exit_code == 0, got.output
    with pytest.raises(SystemExit) as exc:
        main(["record", "scale-exp", "-p", "tile=1024", "-o", str(out)])
    assert exc.value.code == 0 and frozen == []


def test_the_replay_child_freezes_the_replay_machinery_before_it_runs(frozen, monkeypatch,
                                                                      capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", ["-c", str(PACKAGE_DIR.parent), "[]", "--help"])
    with pytest.raises(SystemExit) as exc:
        exec(BOOT, {})  # noqa: S102 - the child's own boot line, run as ``python -I -c``
    assert exc.value.code == 0 and "kernbench.replay" in capsys.readouterr().out
    assert len(frozen) == 1
    assert {"numpy", "pyarrow", "kernbench.replay.session",
            "kernbench.trace.validate"} <= frozen[0]



def test_a_replay_machinery_that_fails_to_import_is_reported_by_main_as_before(
        frozen, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "kernbench.replay.session", None)  # import fails
    monkeypatch.setattr(sys, "argv", ["-c", str(PACKAGE_DIR.parent), "[]",
                                      str(tmp_path / "t.ktrace")])
    with pytest.raises(SystemExit) as exc:
        exec(BOOT, {})  # noqa: S102
    assert exc.value.code == 3  # EXIT_CRASH, with its one line
    assert capsys.readouterr().err.startswith("kernbench replay: crash: ModuleNotFoundError")
    assert len(frozen) == 1

def test_a_frozen_exit_still_tears_modules_down_and_keeps_the_output(tmp_path):
    """Record and replay through the command as processes: the verdict and exit codes are
    the usual ones, and the user module's never-closed file was flushed in both processes
    that imported it (record, then the replay child)."""
    (tmp_path / "user_double.py").write_text(USER_MODULE)
    run = [sys.executable, "-m", "kernbench.cli"]
    rec = subprocess.run([*run, "record", "user_double:double_case", "-o", "d.ktrace"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert rec.returncode == 0, rec.stderr
    assert rec.stdout.startswith("recorded user_double:double_case")
    assert [p.read_text() for p in tmp_path.glob("factory-*.log")] == ["built\n"]
    rep = subprocess.run([*run, "replay", "d.ktrace", "--case", "user_double:double_case"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.startswith("verified: ") and rep.stderr == ""
    assert [p.read_text() for p in tmp_path.glob("factory-*.log")] == ["built\n"] * 2
    verdict = json.loads((tmp_path / "d.ktrace" / "replay" / "verdict.json").read_text())
    assert verdict["status"] == "verified" and verdict["reference"] == "user_double:double_case"


def test_locating_a_case_module_imports_no_triton_hook():
    """The replay parent only locates ``--case``'s module; the hook is for importing it."""
    code = ("import json, sys\n"
            "from kernbench.case.factory import locate\n"
            "import kernbench.cli, kernbench.replay.child\n"
            "print(json.dumps([locate('json:loads'), sorted(sys.modules)]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    where, modules = json.loads(proc.stdout)
    assert where and "kernbench.case.triton_hook" not in modules
    assert "importlib.abc" not in modules
