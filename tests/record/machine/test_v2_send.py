"""ahbm-v2 sends are asynchronous (docs/hardware-model.md, ADR-0596): the kernel issues a
``send`` without waiting for its source to be visible, the link starts reading it once it is
(RAW), and a later write to
the sent buffer waits for the send (WAR). A ring kernel that overwrites a buffer right after
sending it replays verified; with the WAR edge dropped (``scoreboard.DROP_WAR``) it fails."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.record.machine import scoreboard
from tests.conftest import rows

N = 256  # the message that is overwritten (fp32)
BULK = 16 * 1024  # 64 KiB sent first: the link reads it for 1 us (64 GB/s)


@kb.kernel
def late_source(x, y, *, n: int):
    """The sent value comes from a slow load and an exp: it is visible long after issue."""
    p = tl.program_id(0)
    a = tl.exp(tl.load(x + p * n, (n,), tl.float32))
    tl.send("next", a)
    r = tl.recv("prev", (n,), tl.float32)
    tl.store(y + p * n, r)


@kb.kernel
def send_then_overwrite(x, z, bulk, y, *, n: int, nb: int):
    """Rank p sends its slice of ``x`` behind a bulk message that keeps the link busy, then
    at once loads ``z`` into the same buffer; the neighbour must receive ``x``."""
    p = tl.program_id(0)
    b = tl.load(bulk + p * nb, (nb,), tl.float32)
    tl.send("next", b)
    a = tl.load(x + p * n, (n,), tl.float32)
    tl.send("next", a)
    tl.load(z + p * n, (n,), tl.float32, out=a)  # overwrites the buffer just sent
    tl.recv("prev", (nb,), tl.float32)
    r = tl.recv("prev", (n,), tl.float32)
    tl.store(y + p * n, r + a)


def _ring_reference(x, z, **_):
    xs, zs = x.reshape(2, N), z.reshape(2, N)
    return {"y": (np.roll(xs, 1, axis=0) + zs).ravel()}


def _overwrite_case() -> kb.Case:
    return kb.Case(name="send-overwrite", kernel=send_then_overwrite, grid=(2,),
                   tensors={"x": kb.tensor((2 * N,), "float32", init=kb.randn(seed=1)),
                            "z": kb.tensor((2 * N,), "float32", init=kb.randn(seed=2)),
                            "bulk": kb.tensor((2 * BULK,), "float32", init=kb.randn(seed=3)),
                            "y": kb.tensor((2 * N,), "float32", role="output")},
                   params={"n": N, "nb": BULK}, reference=_ring_reference)


def _by_pe(trace: kb.Trace, name: str) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows(trace, name):
        out.setdefault(r["pe"], []).append(r)
    return out


@pytest.mark.parametrize("hw", ["ahbm-v1", "ahbm-v2"])
def test_a_v2_send_is_issued_before_its_source_is_visible_and_starts_when_it_is(rec, hw):
    trace = rec(late_source, {"x": kb.tensor((2 * N,), "float32"),
                              "y": kb.tensor((2 * N,), "float32", role="output")},
                grid=(2,), params={"n": N}, hw=hw)
    exps, sends = _by_pe(trace, "exp"), _by_pe(trace, "send")
    for pe in (0, 1):
        (e,), (s,) = exps[pe], sends[pe]
        assert s["t_start_ps"] == e["t_end_ps"]  # the link reads the value once it is visible
        if hw == "ahbm-v2":
            assert s["t_issue_ps"] < e["t_end_ps"] and s["wait_ps"] == 0
        else:  # blocking issue: the kernel held until the value was visible
            assert s["t_issue_ps"] == e["t_end_ps"]


def _replay(tmp_path) -> tuple[kb.Trace, kb.ReplayResult]:
    trace = kb.record(_overwrite_case(), tmp_path / "send-overwrite.ktrace", hw="ahbm-v2")
    return trace, kb.replay(trace.path, case=_overwrite_case, in_process=True)


def test_overwriting_a_buffer_right_after_sending_it_replays_verified_on_v2(tmp_path):
    trace, res = _replay(tmp_path)
    assert res.ok and res.verdict.get("reference") is not None, res.verdict
    for pe, (_, sent) in _by_pe(trace, "send").items():
        over = [r for r in rows(trace, "dma_read") if r["pe"] == pe][-1]  # the load into a
        assert over["t_issue_ps"] < sent["t_start_ps"]  # the kernel went on at once ...
        assert over["t_start_ps"] >= sent["t_end_ps"]  # ... and the load waited (WAR)


def test_without_the_war_edge_the_overwrite_lands_before_the_send_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(scoreboard, "DROP_WAR", True)
    trace, res = _replay(tmp_path)
    for pe, (_, sent) in _by_pe(trace, "send").items():
        over = [r for r in rows(trace, "dma_read") if r["pe"] == pe][-1]
        assert over["t_end_ps"] < sent["t_start_ps"]
    assert not res.ok
