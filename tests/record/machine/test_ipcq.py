"""IPCQ over the ring: link timing, queue credits, recv_async auto-wait."""

from __future__ import annotations

import math

import pytest

import kernbench as kb
from kernbench import tl
from kernbench.trace.hw import HwConfig
from tests.conftest import rows


@kb.kernel
def pass_right(x, y, *, n: int, late: int):
    p = tl.program_id(0)
    a = tl.load(x + p * n, (n,), tl.float32)
    tl.send("next", a)
    r = tl.recv_async("prev", (n,), tl.float32)
    for _ in range(late):
        tl.exp(a)  # independent work while the message travels
    tl.store(y + p * n, r + 1.0)


def _ring(rec, n=256, late=0, ranks=4, **hw):
    return rec(pass_right, {"x": kb.tensor((ranks * n,), "float32"),
                            "y": kb.tensor((ranks * n,), "float32", role="output")},
               grid=(ranks,), params={"n": n, "late": late}, hw=HwConfig(**hw))


def test_a_message_occupies_the_link_for_bytes_over_bandwidth_and_arrives_latency_later(rec):
    trace = _ring(rec, n=1024)
    for s in rows(trace, "send"):
        assert s["engine"] == "link_tx" and s["kind"] == "ipcq"
        assert s["busy_ps"] == math.ceil(4096 * 1000 / 64)
        assert s["t_end_ps"] == s["t_start_ps"] + s["busy_ps"] + 1_000_000
        assert s["output"]["space"] == "ipcq" and s["output"]["pe"] == (s["pe"] + 1) % 4


def test_recv_async_handle_auto_waits_on_first_use(rec):
    trace = _ring(rec)
    sends = {r["pe"]: r for r in rows(trace, "send")}
    for rv in rows(trace, "recv"):
        src = sends[(rv["pe"] - 1) % 4]
        assert rv["t_end_ps"] == src["t_end_ps"]  # visible when it arrives
    adds = rows(trace, "add")
    assert all(a["wait_ps"] > 0 for a in adds)


def test_independent_work_hides_the_link(rec):
    fast = _ring(rec, late=0)
    busy = _ring(rec, late=200)
    assert all(a["wait_ps"] == 0 for a in rows(busy, "add"))
    assert any(a["wait_ps"] > 0 for a in rows(fast, "add"))


def test_send_blocks_only_while_the_receivers_queue_is_full(rec):
    @kb.kernel
    def flood(x, *, k: int):
        p = tl.program_id(0)
        a = tl.load(x, (64,), tl.float32)
        if p == 0:
            for _ in range(k):
                tl.send("next", a)
        else:
            for _ in range(200):
                tl.exp(a)  # the receiver is busy before it receives anything
            for _ in range(k):
                tl.recv("prev", (64,), tl.float32)

    trace = rec(flood, {"x": kb.tensor((64,), "float32")}, grid=(2,), params={"k": 4},
                hw=HwConfig(ipcq_depth=2))
    sends = rows(trace, "send")
    assert sends[0]["wait_ps"] > 0 or sends[1]["t_issue_ps"] == sends[0]["t_issue_ps"]
    first_recv = min(r["t_issue_ps"] for r in rows(trace, "recv"))
    assert sends[2]["t_issue_ps"] >= first_recv  # the third waits for a free slot


def test_unknown_direction_is_a_kernel_error(rec):
    @kb.kernel
    def bad(x):
        tl.send("left", tl.zeros((4,), tl.float32))

    with pytest.raises(kb.KernelError, match="unknown IPCQ direction 'left'"):
        rec(bad, {"x": kb.tensor((1,), "float32")}, grid=(2,))


def test_recv_shape_must_match_the_message(rec):
    @kb.kernel
    def mismatch(x):
        if tl.program_id(0) == 0:
            tl.send("next", tl.zeros((4,), tl.float32))
        else:
            tl.recv("prev", (8,), tl.float32)

    with pytest.raises(kb.KernelError, match=r"expects \[8\] float32, the message is \[4\]"):
        rec(mismatch, {"x": kb.tensor((1,), "float32")}, grid=(2,))


def test_a_deadlock_is_reported_not_recorded_half(rec, tmp_path):
    @kb.kernel
    def both_send_three(x):
        a = tl.zeros((4,), tl.float32)
        for _ in range(3):  # depth 2: the third send waits for a recv nobody posts
            tl.send("next", a)
        tl.recv("prev", (4,), tl.float32)

    with pytest.raises(kb.KernelError, match=r"deadlock: no PE can make progress \(PE 0 in send"):
        rec(both_send_three, {"x": kb.tensor((1,), "float32")}, grid=(2,))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".ktrace")]



def test_a_ring_wider_than_the_pes_deadlocks_and_says_why(tmp_path):
    case = kb.build_case("ring-attention", {"n_ranks": 16, "S_kv_per_rank": 256,
                                            "phase": "decode"})
    with pytest.raises(kb.KernelError, match=r"deadlock: .* the grid's 16 programs share 8 "
                                             r"PEs, and programs on one PE run one after"):
        kb.record(case, out=tmp_path / "r.ktrace")
