"""docs/hardware-model.md's v2 -> v3 table ("Measured: ahbm-v2 against ahbm-v3") and its
arbitration table ("Programs that wait") are what the recordings give: each row recorded on
the presets it names, every cell compared with the page at the page's precision, "what
binds on v3" included (docs/adr/0753).

The rows are the page's, in its order (a row added to the page without one here fails); the
ring decode rows run in the suite, the rest at their documented sizes in the slow job
(``pytest --slow -m slow``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

import kernbench as kb
from kernbench.analyze import critical_path
from kernbench.analyze.path_parts import PARTS
from kernbench.analyze.path_summary import summary
from kernbench.bench import panel
from kernbench.case.case import factory_params
from kernbench.kernels.registry import build_case
from kernbench.sweep.points import resolve_factory
from kernbench.trace.hw import PRESETS

DOC = Path(__file__).resolve().parents[2] / "docs" / "hardware-model.md"
PREFILL = {"S": 2048, "H_q": 8, "H_kv": 1, "schedule": "pipelined"}
RING = {"phase": "decode", "S_kv_per_rank": 4096, "combine": "binomial"}
ADD = ("tests.triton.kernels.vector_add:case", {"n": 1048576, "block": 1024})
MATMUL = ("kernbench.bench.triton_kernels:matmul_case", {"size": 512})


def _decode(n_pe: int) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    label = ("decode, 32k context x 8 KV heads, split over 8 PEs" if n_pe == 8 else
             f"the same K/V over {n_pe} PEs")
    return (label, "gqa-decode", {"H_kv": n_pe, "H_q": 8 * n_pe, "S_kv": 262144 // n_pe},
            {"n_pe": n_pe})


#: (the start of the row's label, case, params, hw fields on both presets), in page order
V3_ROWS = [
    _decode(8), _decode(16), _decode(32),
    ("causal prefill 2k, pipelined", "gqa-prefill", PREFILL, {}),
    ("the 8k flagship", "gqa-prefill", {"S": 8192, "schedule": "pipelined"}, {}),
    ("ring decode 8 x 4096, binomial combine, on a switch", "ring-attention", RING,
     {"topology": "switch"}),
    ("the same on a 2 x 4 torus", "ring-attention", RING, {"topology": "torus2d"}),
    ("Triton vector add", *ADD, {}),
    ("Triton matmul", *MATMUL, {}),
]
V3_LIGHT = {"ring decode 8 x 4096, binomial combine, on a switch", "the same on a 2 x 4 torus"}
#: the arbitration table: (label, case, params)
ARB_ROWS = [
    ("Triton tutorial softmax", "kernbench.bench.concurrency_kernels:softmax_rows_case", {}),
    ("a native `tl` loop", "kernbench.bench.concurrency_kernels:tile_chain_case", {}),
    ("Triton vector add", *ADD),
    ("Triton matmul", *MATMUL),
    ("causal prefill 2k, pipelined", "gqa-prefill", PREFILL),
]
NUMBER = re.compile(r"\d+\.\d+")


def table(header: str) -> list[list[str]]:
    """The rows of the page's table whose header starts with ``header``."""
    m = re.search(rf"^\| {re.escape(header)}.*\n\|[-| ]+\|\n((?:\|.*\n)+)", DOC.read_text(), re.M)
    assert m, f"docs/hardware-model.md has no table headed {header!r}"
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in m.group(1).splitlines()]


def v3_table() -> list[list[str]]:
    return table("kernel (case, params) | v2 efficiency | v3 efficiency")


def arb_table() -> list[list[str]]:
    return table("kernel (case, params) | 1 per PE")


def _case(name: str, params: dict[str, Any]) -> kb.Case:
    if ":" in name:
        return build_case(name, params, factory=resolve_factory(name), spec=name)
    return build_case(name, params)


def _shown(cell: str) -> tuple[dict[str, str], str | None]:
    """The ``-p`` params a label shows, and the case it names (None: a "the same" row)."""
    shown = dict(re.findall(r"-p ([\w.]+)=([\w.]+)", cell))
    named = re.search(r"\(`([\w.:-]+)[ `]", cell)
    return shown, named.group(1) if named and not named.group(1).startswith("-") else None


def _check_labels(rows: list[list[str]], specs: list[tuple]) -> None:
    assert [r[0][:len(s[0])] for r, s in zip(rows, specs, strict=True)] == [s[0] for s in specs]
    for cells, (_, case, params, *hw) in zip(rows, specs, strict=True):
        shown, named = _shown(cells[0])
        want = {k: str(v) for k, v in params.items()}
        want |= {f"hw.{k}": str(v) for k, v in (hw[0] if hw else {}).items()}
        assert {k: want.get(k) for k in shown} == shown, cells[0]
        assert named is None or named == case, cells[0]


def test_every_row_of_the_v2_v3_table_is_tested():
    _check_labels(v3_table(), V3_ROWS)


def test_every_row_of_the_arbitration_table_is_tested():
    _check_labels(arb_table(), ARB_ROWS)


def _same(cell: str, value: float) -> bool:
    """``value`` printed at the cell's precision is the cell (bold marks aside)."""
    cell = cell.strip("*")
    decimals = len(cell.split(".")[1]) if "." in cell else 0
    return f"{value:.{decimals}f}" == cell


def _binds(trace: kb.Trace, m: dict[str, Any]) -> dict[str, str]:
    """What "what binds on v3" says of a trace, at three decimals: the ceiling efficiency is
    against, each shared part's share of the latency on the critical path, the share spent
    behind other programs, and the path's own share when it is not the whole latency."""
    latency = int(m["latency_ps"])
    s = summary(critical_path(trace), latency)
    out = {"bound": str(m["efficiency_bound"])}
    for p in s["by_part"]:
        if p["part"] in PARTS and round(p["share"], 3) > 0:
            out[p["part"]] = f"{p['share']:.3f}"
    behind = sum(b["behind_ps"] for b in s["behind"]) / latency
    if round(behind, 3) > 0:
        out["behind"] = f"{behind:.3f}"
    if round(s["share"], 3) < 1:
        out["covers"] = f"{s['share']:.3f}"
    return out


def _parse_binds(cell: str) -> dict[str, str]:
    bound = re.match(r"`(\w+)`; path: (.*)$", cell)
    assert bound, f"not a 'what binds' cell: {cell!r}"
    out = {"bound": bound.group(1)}
    for piece in bound.group(2).split(";"):
        piece = piece.strip()
        if piece.startswith("behind "):
            out["behind"] = piece.split()[1]
        elif piece.startswith("path covers "):
            out["covers"] = piece.split()[2]
        elif piece != "-":
            out |= {part: share for part, share in
                    (p.split() for p in piece.split(", "))}
    return out


def test_what_binds_cells_parse_as_the_test_reads_them():
    cells = [_parse_binds(r[5]) for r in v3_table()]
    assert cells[0] == {"bound": "hbm_stack", "hbm": "0.198"}
    assert all(set(c) <= {"bound", "behind", "covers", *PARTS} for c in cells)


def _record(case: str, params: dict[str, Any], hw: kb.HwConfig, path: Path
            ) -> tuple[kb.Trace, dict[str, Any]]:
    trace = kb.record(_case(case, params), path, hw=hw)
    return trace, kb.analyze.metrics(trace)


@pytest.mark.parametrize("index", [
    pytest.param(i, id=label.strip("`").replace(" ", "-"),
                 marks=() if label in V3_LIGHT else pytest.mark.slow)
    for i, (label, *_) in enumerate(V3_ROWS)])
def test_v2_v3_row_is_what_the_recordings_give(index, tmp_path):
    cells = v3_table()[index]
    _, case, params, fields = V3_ROWS[index]
    got: dict[str, tuple[float, float]] = {}
    for preset in ("ahbm-v2", "ahbm-v3"):
        hw = dataclasses.replace(PRESETS[preset], **fields)
        trace, m = _record(case, params, hw, tmp_path / f"{preset}.ktrace")
        got[preset] = (float(m["efficiency"]), int(m["latency_ps"]) / 1e6)
    wrong = [(col, cell, value) for col, cell, value in zip(
        ("v2 efficiency", "v3 efficiency", "v2 latency", "v3 latency"), cells[1:5],
        (got["ahbm-v2"][0], got["ahbm-v3"][0], got["ahbm-v2"][1], got["ahbm-v3"][1]),
        strict=True) if not _same(cell, value)]
    assert wrong == [], f"{cells[0]}: the page says, the recording gives: {wrong}"
    assert _parse_binds(cells[5]) == _binds(trace, m), cells[0]  # trace: the v3 one


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(ARB_ROWS)),
                         ids=[label.strip("`").replace(" ", "-") for label, *_ in ARB_ROWS])
def test_arbitration_row_is_what_the_recordings_give(index, tmp_path):
    cells = arb_table()[index]
    _, case, params = ARB_ROWS[index]
    got = {}
    for preset in ("ahbm-v2", "ahbm-v3"):
        for policy in ("in_order", "ready_first"):
            for k in (1, 32):
                hw = dataclasses.replace(PRESETS[preset], engine_arbitration=policy,
                                         max_programs_per_pe=k)
                _, m = _record(case, params, hw, tmp_path / f"{preset}-{policy}-{k}.ktrace")
                got[preset, policy, k] = (float(m["efficiency"]), int(m["latency_ps"]) / 1e6)
    v2, v3 = (lambda p, k: got["ahbm-v2", p, k]), (lambda p: got["ahbm-v3", p, 32])
    assert v2("in_order", 1) == v2("ready_first", 1)  # one program: nothing to arbitrate
    want = [[v2("in_order", 1)[1]], [v2("in_order", 32)[1]], [v2("ready_first", 32)[1]],
            [v2("in_order", 32)[0], v2("ready_first", 32)[0]],
            [v3("in_order")[1], v3("ready_first")[1], v3("in_order")[0], v3("ready_first")[0]]]
    for cell, values in zip(cells[1:], want, strict=True):
        shown = NUMBER.findall(cell)
        assert len(shown) == len(values) and all(
            _same(s, v) for s, v in zip(shown, values, strict=True)), (cells[0], cell, values)


def _full(case: str, params: dict[str, Any]) -> dict[str, Any]:
    return {**factory_params(resolve_factory(case)), **params}


def test_the_panels_ahbm_v3_rows_are_rows_of_the_page():
    """``kernbench panel --hw ahbm-v3``'s ring decode rows are the table's, on the preset's
    own topology and on a switch; its decode 32k and 2k prefill rows are the table's too."""
    rows = {(case, tuple(sorted(_full(case, params).items())),
             fields.get("topology", PRESETS["ahbm-v3"].topology), fields.get("n_pe", 8))
            for _, case, params, fields in V3_ROWS}
    quick = [c for c in panel.QUICK if c.label.startswith(("decode 32k (", "prefill 2k causal "
                                                           "pipelined"))]
    assert len(quick) == 2 and len(panel.ROUTED) == 2
    for cfg in [*panel.ROUTED, *quick]:
        key = (cfg.case, tuple(sorted(_full(cfg.case, cfg.params).items())),
               cfg.topology or PRESETS["ahbm-v3"].topology, 8)
        assert key in rows, cfg.label
