"""A new user's tiled matmul (examples/tiled_matmul.py, outside the package): record, replay
by ``--case``, plot, and the pytest plugin's regression check against its checked-in golden
— with no Python beyond the kernel module itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from matplotlib.image import imread

import kernbench as kb
from kernbench.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _pytest(where: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(where))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(where / "tiled_matmul.py"), *args],
                          cwd=where, env=env, capture_output=True, text=True, timeout=300)


def test_user_matmul_record_replay_plot_and_regression_check(tmp_path, monkeypatch):
    work = tmp_path / "user"
    shutil.copytree(EXAMPLES, work)
    monkeypatch.syspath_prepend(str(work))
    runner = CliRunner()
    mm = tmp_path / "mm.ktrace"
    result = runner.invoke(main, ["record", "tiled_matmul:case", "-p", "N=1024", "-o", str(mm)])
    assert result.exit_code == 0, result.output
    trace = kb.Trace(mm)
    assert trace.manifest["factory"] == "tiled_matmul:case" and not trace.manifest["builtin"]
    assert trace.manifest["case_params"]["N"] == 1024
    result = runner.invoke(main, ["replay", str(trace.path)])  # never imports the factory
    assert result.exit_code == 0 and "--case tiled_matmul:case" in result.output, result.output
    result = runner.invoke(main, ["replay", str(trace.path), "--case", "tiled_matmul:case"])
    assert result.exit_code == 0 and result.output.startswith("verified"), result.output
    result = runner.invoke(main, ["plot", str(trace.path), "-o", str(tmp_path / "mm.png")])
    assert result.exit_code == 0, result.output
    assert imread(tmp_path / "mm.png").shape[1] >= 1000
    # the module's own test, through the plugin, against the checked-in golden
    run = _pytest(work)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_user_matmul_regression_is_caught_by_the_plugin(tmp_path):
    work = tmp_path / "user"
    shutil.copytree(EXAMPLES, work)
    module = work / "tiled_matmul.py"
    # a user "optimisation" that drops the prefetch: every Bt load now stalls the GEMM
    text = module.read_text()
    slower = text.replace("        if j + 1 < tiles:  # prefetch", "        if False:  # prefetch")
    slower = slower.replace("        w = w_next\n",
                            "        w = w_next if j == 0 else tl.load(bt + j * BN * K, (BN, K),"
                            " tl.bfloat16)\n")
    assert slower != text
    module.write_text(slower)
    run = _pytest(work)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "regressed against the golden" in run.stdout
    assert re.search(r"latency=\+1%\s+\d+\s+\d+\s+\+[\d.]+%\s+FAIL", run.stdout), run.stdout


def test_readme_shows_the_checked_in_picture_of_the_example():
    root = EXAMPLES.parent
    picture = root / "docs" / "pictures" / "tiled-matmul.png"
    readme = (root / "README.md").read_text()
    assert "](docs/pictures/tiled-matmul.png)" in readme
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert imread(picture).shape[1] >= 1000
    for section in ("## Your own kernel, from the command line", "## Pictures", "## Use in CI"):
        assert section in readme
    assert "kernbench record tiled_matmul:case" in readme
