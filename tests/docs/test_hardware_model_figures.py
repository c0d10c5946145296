"""docs/hardware-model.md's concurrency table is what the recordings give: each row recorded on
both presets, its efficiency and latency compared with the page at the page's precision.

The rows are the page's, in its order (a row added to the page without one here fails);
the light row runs in the suite, the rest at their documented sizes in the slow job
(``pytest --slow -m slow``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case

DOC = Path(__file__).resolve().parents[2] / "docs" / "hardware-model.md"
PREFILL = {"S": 2048, "H_q": 8, "H_kv": 1}
RING = {"S_kv_per_rank": 1024}
#: (the start of the row's label, case, params); one per row of the page's table, in order
ROWS = [
    ("decode 4k", "gqa-decode", {"S_kv": 4096}),
    ("decode 32k (", "gqa-decode", {}),
    ("decode 32k composite", "gqa-decode", {"stream": "composite", "T_kv": 4096}),
    ("causal prefill 2k, 1 group, serial", "gqa-prefill", PREFILL),
    ("the same, `-p schedule=pipelined`", "gqa-prefill", {**PREFILL, "schedule": "pipelined"}),
    ("the 8k flagship", "gqa-prefill", {"S": 8192, "schedule": "pipelined"}),
    ("ring prefill 8 x 1024, serial", "ring-attention", RING),
    ("the same, `-p schedule=pipelined`", "ring-attention", {**RING, "schedule": "pipelined"}),
    ("ring decode 8 x 4096", "ring-attention", {"phase": "decode", "S_kv_per_rank": 4096}),
]
LIGHT = {"decode 4k"}


def table() -> list[list[str]]:
    text = DOC.read_text()
    m = re.search(r"^\| kernel \(case, params\) \|.*\n\|[-| ]+\|\n((?:\|.*\n)+)", text, re.M)
    assert m, "docs/hardware-model.md has no concurrency table"
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in m.group(1).splitlines()]


def test_every_row_of_the_concurrency_table_is_tested():
    rows = table()
    assert [r[0][:len(label)] for r, (label, _, _) in zip(rows, ROWS, strict=True)] == [
        label for label, _, _ in ROWS]
    for cells, (_, case, params) in zip(rows, ROWS, strict=True):
        shown = dict(re.findall(r"-p (\w+)=(\w+)", cells[0]))
        assert {k: str(v) for k, v in params.items() if k in shown} == shown, cells[0]
        named = re.search(r"`(gqa-\w+|ring-attention)", cells[0])
        assert named is None or named.group(1) == case


def _same(cell: str, value: float) -> bool:
    """``value`` printed at the cell's precision is the cell (bold marks aside)."""
    cell = cell.strip("*")
    decimals = len(cell.split(".")[1]) if "." in cell else 0
    return f"{value:.{decimals}f}" == cell


@pytest.mark.parametrize("index", [
    pytest.param(i, id=label.strip("(` ").replace(" ", "-"),
                 marks=() if label in LIGHT else pytest.mark.slow)
    for i, (label, _, _) in enumerate(ROWS)])
def test_concurrency_table_row_is_what_the_recordings_give(index, tmp_path):
    cells = table()[index]
    _, case, params = ROWS[index]
    got = {}
    for hw in ("ahbm-v1", "ahbm-v2"):
        trace = kb.record(build_case(case, params), tmp_path / f"{hw}.ktrace", hw=hw)
        m = kb.analyze.metrics(trace)
        got[hw] = (float(m["efficiency"]), int(m["latency_ps"]) / 1e6)
    wrong = [(col, cell, value) for col, cell, value in zip(
        ("v1 efficiency", "v2 efficiency", "v1 latency", "v2 latency"), cells[1:5],
        (got["ahbm-v1"][0], got["ahbm-v2"][0], got["ahbm-v1"][1], got["ahbm-v2"][1]),
        strict=True) if not _same(cell, value)]
    assert wrong == [], f"{cells[0]}: the page says, the recording gives: {wrong}"
