"""Messages addressed by PE index (ADR-0750) on every machine: the
PE-by-PE closed form of ahbm-v1/v2 (``record/machine/ipcq.py``) and the chip of ahbm-v3
(``record/machine/chip/ipcq.py``). To a ring neighbour an indexed message is timed exactly
as ``"next"``/``"prev"``; to any other PE it is routed hop by hop and costs what it crosses;
credits stay per (source, destination) pair."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.trace.hw import PRESETS
from kernbench.trace.topology import route
from tests.conftest import rows

HW = ["ahbm-v1", "ahbm-v2", "ahbm-v3"]
LINK_PS = math.ceil(4096 * 1000 / 64)  # a 4 KiB message on a 64 GB/s link
HOP_PS = 1_000_000  # ahbm-v1/v2's link_latency_ns
TIMING = ["pe", "seq", "name", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps", "wait_ps"]


@kb.kernel
def pass_right(x, y, *, n: int, ranks: int, by_index: bool):
    p = tl.program_id(0)
    a = tl.load(x + p * n, (n,), tl.float32)
    nxt, prv = ((p + 1) % ranks, (p - 1) % ranks) if by_index else ("next", "prev")
    tl.send(nxt, a)
    r = tl.recv_async(prv, (n,), tl.float32)
    tl.store(y + p * n, r + 1.0)


def _pass_right(rec, hw, by_index, ranks=4, n=256):
    def reference(x, **_):
        return {"y": np.roll(x.reshape(ranks, n), 1, axis=0).ravel() + 1.0}

    return rec(pass_right, {"x": kb.tensor((ranks * n,), "float32", init=kb.randn(seed=5)),
                            "y": kb.tensor((ranks * n,), "float32", role="output")},
               grid=(ranks,), params={"n": n, "ranks": ranks, "by_index": by_index}, hw=hw,
               reference=reference)


@pytest.mark.parametrize("hw", HW)
def test_an_indexed_send_to_a_ring_neighbour_is_timed_exactly_as_next_and_prev(rec, hw):
    by_dir, by_index = _pass_right(rec, hw, False), _pass_right(rec, hw, True)
    a, b = by_dir.ops.sort("pe", "seq"), by_index.ops.sort("pe", "seq")
    assert a.select(TIMING).equals(b.select(TIMING))
    sends = rows(by_index, "send")
    assert [json.loads(s["attrs"]) for s in sends] == [
        json.loads(s["attrs"]) for s in rows(by_dir, "send")]  # {"dir": "next", "to": p+1}
    assert [json.loads(r["attrs"]) for r in rows(by_index, "recv")] == [
        {"from": (r["pe"] - 1) % 4} for r in rows(by_index, "recv")]
    # its own queue: the slots of source s follow the two direction regions
    slot = 2 * by_index.manifest["hw"]["ipcq_slot_kib"] * 1024
    for s in sends:
        assert s["output"]["addr"] == (2 + s["pe"]) * slot


@kb.kernel
def one_message(x, y, *, dest: int):
    p = tl.program_id(0)
    if p == 0:
        tl.send(dest, tl.load(x, (1024,), tl.float32))
    elif p == dest:
        tl.store(y, tl.recv(0, (1024,), tl.float32))


def _one_message(rec, hw, dest, ranks=8):
    return rec(one_message, {"x": kb.tensor((1024,), "float32", init=kb.randn(seed=3)),
                             "y": kb.tensor((1024,), "float32", role="output")},
               grid=(ranks,), params={"dest": dest}, hw=hw,
               reference=lambda x, **_: {"y": x})


@pytest.mark.parametrize("hw", ["ahbm-v1", "ahbm-v2"])
@pytest.mark.parametrize("dest", [2, 3, 5, 7])
def test_on_the_ring_a_message_to_any_pe_crosses_the_next_links_hop_by_hop(rec, hw, dest):
    trace = _one_message(rec, hw, dest)
    (send,) = rows(trace, "send")
    # PE 7 is PE 0's "prev" neighbour: one link; any other PE one way round the "next" links
    hops = 1 if dest == 7 else dest
    assert hops == (1 if dest == 7 else len(route("ring", 8, 0, dest)))
    assert send["busy_ps"] == LINK_PS
    assert send["t_end_ps"] - send["t_start_ps"] == LINK_PS + hops * HOP_PS
    assert json.loads(send["attrs"]) == ({"dir": "prev", "to": 7} if dest == 7 else
                                         {"to": dest})
    (recv,) = rows(trace, "recv")
    assert recv["pe"] == dest and recv["t_end_ps"] >= send["t_end_ps"]
    assert kb.replay(trace.path, case=lambda: _case_of(trace), in_process=True).ok


def _case_of(trace):
    return kb.Case(name="t", kernel=one_message, grid=(8,),
                   tensors={"x": kb.tensor((1024,), "float32", init=kb.randn(seed=3)),
                            "y": kb.tensor((1024,), "float32", role="output")},
                   params={"dest": trace.manifest["params"]["dest"]},
                   reference=lambda x, **_: {"y": x})


@pytest.mark.parametrize("topology", ["ring", "bidir_ring", "mesh2d", "torus2d", "switch"])
def test_on_the_chip_a_message_over_h_hops_arrives_h_latencies_after_its_bytes(rec, topology):
    hw = dataclasses.replace(PRESETS["ahbm-v3"], topology=topology)
    for dest in (1, 3, 6):
        (send,) = rows(_one_message(rec, hw, dest), "send")
        hops = len(route(topology, 8, 0, dest))
        assert send["t_end_ps"] - send["t_start_ps"] == (
            LINK_PS + hops * hw.link_latency_ns * 1000), (dest, hops)


@kb.kernel
def two_senders(x, *, k: int, busy: int):
    p = tl.program_id(0)
    a = tl.load(x, (64,), tl.float32)
    if p in (1, 2):
        for _ in range(k):
            tl.send(0, a)
    elif p == 0:
        for _ in range(busy):
            a = tl.exp(a)  # PE 0 receives nothing for a while
        for s in (1, 2):
            for _ in range(k):
                tl.recv(s, (64,), tl.float32)


@pytest.mark.parametrize("hw", HW)
def test_credits_are_per_source_and_destination_pair(rec, hw):
    def record(k):
        return rec(two_senders, {"x": kb.tensor((64,), "float32")}, grid=(3,),
                   params={"k": k, "busy": 300}, hw=hw)

    two = record(2)  # depth 2: each source's two messages fit its own queue
    first_recv = min(r["t_issue_ps"] for r in rows(two, "recv"))
    assert all(s["t_issue_ps"] < first_recv for s in rows(two, "send"))
    three = record(3)  # the third of each source waits for PE 0's first receive from it
    recvs = rows(three, "recv")
    for pe in (1, 2):
        third = [s for s in rows(three, "send") if s["pe"] == pe][2]
        claim = min(r["t_issue_ps"] for r in recvs if json.loads(r["attrs"])["from"] == pe)
        assert third["t_issue_ps"] >= claim
    assert [json.loads(r["attrs"])["from"] for r in recvs] == [1, 1, 1, 2, 2, 2]


@kb.kernel
def out_of_order(x, y):
    p = tl.program_id(0)
    if p > 0:
        tl.send(0, tl.load(x + p * 16, (16,), tl.float32))
    else:  # receives PE 2's message first, though PE 1's arrives first
        late = tl.recv(2, (16,), tl.float32)
        early = tl.recv(1, (16,), tl.float32)
        tl.store(y, late)
        tl.store(y + 16, early)


@pytest.mark.parametrize("hw", HW)
def test_a_receive_from_a_pe_takes_that_pes_message_and_replays_verified(rec, hw):
    def case():
        return kb.Case(name="ooo", kernel=out_of_order, grid=(3,),
                       tensors={"x": kb.tensor((48,), "float32", init=kb.randn(seed=9)),
                                "y": kb.tensor((32,), "float32", role="output")},
                       reference=lambda x, **_: {"y": np.concatenate([x[32:], x[16:32]])})

    c = case()
    trace = rec(c.kernel, c.tensors, grid=c.grid, hw=hw, reference=c.reference)
    res = kb.replay(trace.path, case=case, in_process=True)
    assert res.ok and res.verdict.get("reference") is not None, res.verdict


@kb.kernel
def converge(x, y):
    p = tl.program_id(0)
    if p < 2:  # PEs 0 and 1 send to PE 2 at once: their routes share the link into it
        tl.send(2, tl.load(x + p * 1024, (1024,), tl.float32))
    elif p == 2:
        tl.store(y, tl.recv(0, (1024,), tl.float32))
        tl.store(y + 1024, tl.recv(1, (1024,), tl.float32))


@pytest.mark.parametrize("hw, topology", [("ahbm-v1", "ring"), ("ahbm-v2", "ring"),
                                          ("ahbm-v3", "switch"), ("ahbm-v3", "ring")])
def test_routed_messages_share_the_links_they_cross(rec, hw, topology):
    cfg = dataclasses.replace(PRESETS[hw], topology=topology)
    trace = rec(converge, {"x": kb.tensor((2048,), "float32", init=kb.randn(seed=4)),
                           "y": kb.tensor((2048,), "float32", role="output")},
                grid=(4,), hw=cfg, reference=lambda x, **_: {"y": x})
    sends = rows(trace, "send")
    assert {s["pe"] for s in sends} == {0, 1}
    # when each message left the link into PE 2 (both cross it): its arrival less its hops
    hop_ps = cfg.link_latency_ns * 1000
    left = sorted(s["t_end_ps"] - len(route(topology, 4, s["pe"], 2)) * hop_ps for s in sends)
    assert left[0] >= min(s["t_start_ps"] for s in sends) + LINK_PS
    assert left[1] - left[0] >= LINK_PS  # one message at a time on the shared link
    res = kb.replay(trace.path, in_process=True, case=lambda: kb.Case(
        name="t", kernel=converge, grid=(4,),
        tensors={"x": kb.tensor((2048,), "float32", init=kb.randn(seed=4)),
                 "y": kb.tensor((2048,), "float32", role="output")},
        reference=lambda x, **_: {"y": x}))
    assert res.ok, res.verdict
