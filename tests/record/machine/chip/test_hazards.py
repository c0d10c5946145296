"""Hazards on the chip (time-faithful replay, docs/trust.md): an ordering bug of the machine
shows as wrong data. The ahbm-v2 hazard kernels replay verified on ahbm-v3; with the chip's
WAR edge dropped (``board.DROP_WAR``), or with a deliberately wrong arbitration that starts
a program's ops out of its own order without waiting for their data
(``engines.OUT_OF_ORDER``), the same replays fail."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench.record.machine.chip import board, engines
from tests.record.machine.test_v2_hazards import CASES


def _replay(name: str, tmp_path) -> kb.ReplayResult:
    factory = CASES[name]
    trace = kb.record(factory(), tmp_path / f"{name}.ktrace", hw="ahbm-v3")
    return kb.replay(trace.path, case=factory, in_process=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reuse_while_an_async_op_reads_replays_verified_on_the_chip(name, tmp_path) -> None:
    res = _replay(name, tmp_path)
    assert res.ok and res.verdict.get("reference") is not None, res.verdict


@pytest.mark.parametrize("name", sorted(CASES))
def test_without_the_chips_war_edge_the_same_replay_fails(name, tmp_path, monkeypatch):
    monkeypatch.setattr(board, "DROP_WAR", True)
    assert not _replay(name, tmp_path).ok


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_wrong_arbitration_starting_ops_out_of_order_makes_the_replay_fail(
        name, tmp_path, monkeypatch):
    monkeypatch.setattr(engines, "OUT_OF_ORDER", True)
    assert not _replay(name, tmp_path).ok
