"""docs/sweeps.md's layout of a sweep directory lists everything a sweep leaves in it (the
``.lock`` file included)."""

from __future__ import annotations

import re
from pathlib import Path

from kernbench.sweep import resolve_spec, run_sweep

DOC = Path(__file__).resolve().parents[2] / "docs" / "sweeps.md"


def _documented() -> set[str]:
    block = DOC.read_text().split("\nSWEEP/\n", 1)[1].split("```", 1)[0]
    names = [m.group(1) for m in re.finditer(r"^  (\S+)", block, re.M)]
    return {n.split("/")[0] for n in names}


def test_sweep_directory_holds_only_what_the_layout_lists(tmp_path):
    rules = tmp_path / "r.toml"
    rules.write_text('[[rule]]\nmetric = "latency"\nop = ">"\nvalue = 0\n')
    out = tmp_path / "S"
    run_sweep(resolve_spec("scale-exp", ["tile=512,1024"], check=True, rules=str(rules)), out,
              workers=1)
    assert _documented() == {"sweep.toml", "rules.toml", "points", "points.parquet", ".lock"}
    assert {p.name for p in out.iterdir()} == _documented()
    assert all(p.name.endswith(".ktrace") and p.is_dir() for p in (out / "points").iterdir())
