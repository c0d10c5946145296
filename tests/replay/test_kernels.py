"""The kernel library replays and verifies (reduced sizes): composites, IPCQ, lazy streams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case
from kernbench.replay import replay

CASES: list[tuple[str, dict[str, Any]]] = [
    ("gqa-decode", {"S_kv": 512, "T_kv": 128, "H_q": 8, "H_kv": 1, "D": 64}),
    ("gqa-decode", {"S_kv": 512, "T_kv": 128, "H_q": 8, "H_kv": 1, "D": 64,
                    "stream": "composite"}),
    ("gqa-prefill", {"S": 128, "T_q": 16, "T_kv": 64, "H_q": 8, "H_kv": 1, "D": 32}),
    ("ring-attention", {"n_ranks": 2, "S_kv_per_rank": 128, "phase": "prefill", "C": 32,
                        "T_q": 16, "G": 2, "D": 32}),
    ("flash-attn", {"s_kv": 512, "t_kv": 128, "t_q": 16, "d": 64}),
    ("stream-sum", {"tiles": 8, "rows": 64}),
]


@pytest.mark.parametrize(("name", "params"), CASES,
                         ids=[f"{n}-{p.get('stream', p.get('phase', ''))}" for n, p in CASES])
def test_library_kernels_replay_against_their_reference(tmp_path: Path, name: str,
                                                        params: dict[str, Any]) -> None:
    trace = kb.record(build_case(name, params), tmp_path / "k.ktrace")
    res = replay(trace.path, in_process=True)
    assert res.verified, res.verdict
    assert res.verdict["reference"] == f"registry:{name}"
    assert all(o["checked"] for o in res.verdict["outputs"].values())
