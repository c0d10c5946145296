"""The analyses count what they will build against the memory budget first (issue 43): the
access picture's per-element arrays and the race detector's access rows are refused in one
line, exit 2, naming what needs how much and the variable that raises the limit. (The
footprints' own count: ``test_footprint.py``; the per-element frame and every command on a
tile bomb: ``tests/fuzz/test_tile_bomb.py``.)"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kernbench.analyze import access, byte_runs, race
from kernbench.cli import main

SOFTMAX = Path(__file__).parents[2] / "traces" / "v2" / "softmax.ktrace"


def _one_line(args: list[str]) -> str:
    r = CliRunner().invoke(main, args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


def test_plot_access_refuses_a_map_over_the_budget_before_building_it(tmp_path: Path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", "4")
    monkeypatch.setattr(access, "BYTES_PER_MAP_ELEMENT", 1 << 21)  # 16 x 256 x 2 MiB = 8 GiB
    line = _one_line(["plot", str(SOFTMAX), "--access", "x", "-o", str(tmp_path / "a.png")])
    assert "the access map of x (4,096 elements) needs 8 GiB, over the 4 GiB limit (set " \
           "KERNBENCH_MAX_MEMORY_GB to raise it)" in line
    assert not (tmp_path / "a.png").exists()


def test_check_refuses_a_race_detection_over_the_budget(monkeypatch) -> None:
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", "4")
    for module in (byte_runs, race):
        monkeypatch.setattr(module, "BYTES_PER_ACCESS", 1 << 30)
    line = _one_line(["check", str(SOFTMAX)])
    assert "TraceLimitError: the race detector (" in line and "accesses cut into" in line
    assert "over the 4 GiB limit (set KERNBENCH_MAX_MEMORY_GB to raise it)" in line
