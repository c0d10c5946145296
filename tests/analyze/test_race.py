"""The race detector: one synthetic case per hazard, boundaries, recorded cross-PE races,
and a brute-force oracle (program order and IPCQ happens-before included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernbench as kb
from kernbench import tl
from kernbench.analyze import check
from kernbench.analyze.frames import load_ops
from kernbench.analyze.race import HAZARDS, hazards

from .conftest import fake_ops, operand


def found(rows: list[dict[str, Any]]) -> set[tuple[str, int, int | None]]:
    df = hazards(fake_ops(rows))
    return set(zip(df["hazard"], df["op_id"], df["other_op_id"], strict=True))


def load(t: int, busy: int, end: int, hbm: int, tcm: int, n: int = 64, pe: int = 0) -> dict:
    return dict(name="dma_read", pe=pe, t=t, busy=busy, end=end,
                ins=[operand("hbm", hbm, n)], out=operand("tcm", tcm, n, pe))


def exp(t: int, src: int, dst: int, n: int = 64, pe: int = 0, busy: int = 10) -> dict:
    return dict(name="exp", pe=pe, t=t, busy=busy, ins=[operand("tcm", src, n, pe)],
                out=operand("tcm", dst, n, pe))


def store(t: int, src: int, hbm: int, end: int, n: int = 64, pe: int = 0) -> dict:
    return dict(name="dma_write", pe=pe, t=t, busy=10, end=end,
                ins=[operand("tcm", src, n, pe)], out=operand("hbm", hbm, n))


def scope_exit(t: int, lo: int, hi: int, pe: int = 0) -> dict:
    return dict(name="scope_exit", pe=pe, t=t, busy=0,
                attrs=json.dumps({"hi": hi, "lo": lo}, sort_keys=True))


def send(t: int, pe: int, to: int, slot: int, src: int = 512, n: int = 16) -> dict:
    """A message from ``pe`` into ``to``'s ipcq ``slot`` (arrives at t + 50)."""
    return dict(name="send", pe=pe, t=t, busy=10, end=t + 50, ins=[operand("tcm", src, n, pe)],
                out=operand("ipcq", slot, n, to))


def fill(pe: int, n: int = 64) -> dict:
    """Writes tcm [0, n) of ``pe`` from nothing (a store's source)."""
    return exp(0, 0, 0, n, pe) | {"ins": []}


def recv(t: int, pe: int, slot: int, dst: int = 768, n: int = 16) -> dict:
    return dict(name="recv", pe=pe, t=t, busy=0, ins=[operand("ipcq", slot, n, pe)],
                out=operand("tcm", dst, n, pe))


def test_clean_pipeline_has_no_hazard() -> None:
    assert found([load(0, 10, 100, 0, 0), exp(100, 0, 64), store(110, 64, 4096, 200),
                  scope_exit(200, 0, 128)]) == set()


def test_read_before_producer_lands_is_raw() -> None:
    assert found([load(0, 10, 100, 0, 0), exp(99, 0, 64)]) == {("raw", 1, 0)}


def test_read_exactly_at_landing_is_fine() -> None:
    assert found([load(0, 10, 100, 0, 0), exp(100, 0, 64)]) == set()


def test_partial_overlap_is_still_raw_and_names_the_bytes() -> None:
    rows = [load(0, 10, 100, 0, 0, n=64), exp(50, 48, 256, n=16)]
    df = hazards(fake_ops(rows))
    assert df.select("hazard", "op_id", "other_op_id", "lo", "hi").rows() == [
        ("raw", 1, 0, 48, 64)]
    assert "tcm@pe0 [48, 64)" in df["message"][0]


def test_only_the_last_program_order_write_counts() -> None:
    # op 0 lands late but op 1 overwrote the bytes first: waw, and the read is judged
    # against op 1 (landed) only
    rows = [load(0, 10, 500, 0, 0), load(10, 10, 100, 64, 0), exp(200, 0, 64)]
    assert found(rows) == {("waw", 1, 0)}


def test_read_after_scope_exit_is_dead() -> None:
    rows = [load(0, 10, 100, 0, 0), scope_exit(100, 0, 64), exp(120, 0, 64)]
    assert found(rows) == {("dead_read", 2, 1)}


def test_rewrite_after_scope_exit_revives_bytes() -> None:
    rows = [load(0, 10, 100, 0, 0), scope_exit(100, 0, 64), load(100, 10, 200, 64, 0),
            exp(200, 0, 64)]
    assert found(rows) == set()


def test_write_landing_after_its_scope_exit_is_late() -> None:
    rows = [load(0, 10, 300, 0, 0), scope_exit(100, 0, 64)]
    assert found(rows) == {("late_write", 1, 0)}


def test_never_written_scratch_is_uninitialised() -> None:
    assert found([exp(0, 0, 64)]) == {("uninit_read", 0, None)}


def test_hbm_has_initial_contents() -> None:
    assert found([load(0, 10, 100, 0, 0)]) == set()


def test_later_write_overtaking_an_in_flight_read_is_war() -> None:
    # the load reads hbm [0, 64) until 500; a store to those bytes lands at 300
    rows = [load(0, 10, 500, 0, 0), exp(0, 128, 64, n=64) | {"ins": []},
            store(100, 64, 0, 300)]
    assert ("war", 0, 2) in found(rows)


def test_other_pe_write_inside_read_window_is_war_xpe() -> None:
    # (the two are unordered too: op 2 writes bytes op 0 reads, and no message orders them)
    rows = [load(0, 10, 500, 0, 0, pe=0), exp(0, 0, 64, pe=1) | {"ins": []},
            store(100, 64, 32, 300, n=16, pe=1)]
    assert found(rows) == {("war_xpe", 0, 2), ("race_wr", 2, 0)}


def test_other_pe_write_at_window_edges_is_no_war_xpe_but_still_unordered() -> None:
    fill = exp(0, 0, 64, pe=1) | {"ins": []}
    assert found([load(100, 10, 500, 0, 0, pe=0), fill, store(10, 64, 0, 100, pe=1)]) == {
        ("race_wr", 2, 0)}
    assert found([load(100, 10, 500, 0, 0, pe=0), fill, store(10, 64, 0, 500, pe=1)]) == {
        ("race_wr", 2, 0)}


# -- cross-PE order: only IPCQ send -> recv orders two PEs (issue 11, point 5) -------------
def test_trust_5_two_pes_writing_the_same_hbm_bytes_race_even_far_apart_in_time() -> None:
    rows = [fill(0), store(10, 0, 4096, 100, pe=0),
            fill(1), store(5000, 0, 4096 + 32, 5100, n=64, pe=1)]
    df = hazards(fake_ops(rows))
    assert set(zip(df["hazard"], df["op_id"], df["other_op_id"], strict=True)) == {
        ("race_ww", 3, 1)}
    assert df.select("space", "lo", "hi").row(0) == ("hbm", 4096 + 32, 4096 + 64)
    assert (df["src"][0], df["other_src"][0]) == ("k.py:4", "k.py:2")
    assert "op 3 (pe1) and op 1 (pe0) both write hbm@pe0" in df["message"][0]


def test_trust_5_a_message_orders_a_write_before_the_other_pes_read() -> None:
    rows = [fill(0), store(10, 0, 4096, 100, pe=0),
            send(100, 0, 1, 0), recv(150, 1, 0), load(150, 10, 200, 4096, 0, pe=1)]
    assert found(rows) == {("uninit_read", 2, None)}  # (the send's tcm source, not a race)


def test_trust_5_a_read_before_the_message_is_unordered_with_the_later_write() -> None:
    # pe1 reads before it receives; pe0 writes before it sends: nothing orders them
    rows = [fill(0), store(10, 0, 4096, 100, pe=0),
            load(0, 10, 20, 4096, 0, pe=1), send(100, 0, 1, 0), recv(150, 1, 0)]
    assert ("race_rw", 2, 1) in found(rows)


def test_trust_5_order_is_transitive_through_a_chain_of_messages() -> None:
    head = [fill(0), store(10, 0, 4096, 100, pe=0),
            send(100, 0, 1, 0), recv(150, 1, 0)]
    tail = [recv(250, 2, 0), load(250, 10, 300, 4096, 64, pe=2)]
    assert not any(h.startswith("race") for h, *_ in found(head + [send(150, 1, 2, 0)] + tail))
    # without pe1 forwarding, pe2's "recv" matches nothing and orders nothing
    assert ("race_rw", 6, 1) in found(head + [exp(150, 768, 800, n=16, pe=1)] + tail)


def test_trust_5_reads_of_shared_bytes_from_every_pe_are_no_race() -> None:
    rows = [load(0, 10, 100, 0, 0, pe=p) for p in range(8)]
    assert found(rows) == set()


def race_kernel_case(ordered: bool, programs: int = 4) -> kb.Case:
    @kb.kernel
    def all_store(x, y, *, n: int):
        a = tl.load(x, (n,), tl.float32)
        b = tl.exp(a)
        if ordered and tl.program_id(0) > 0:  # wait for the previous PE's store
            tl.recv("prev", (n,), tl.float32)
        tl.store(y, b)  # every program stores the same bytes
        if ordered and tl.program_id(0) < tl.num_programs(0) - 1:
            tl.send("next", b)

    return kb.Case(name="all-store", kernel=all_store, grid=(programs,),
                   tensors={"x": kb.tensor((64,), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((64,), "float32", role="output")},
                   params={"n": 64}, reference=lambda x: {"y": np.exp(x)})


STORE_LINE = f"{Path(__file__).name}:{race_kernel_case.__code__.co_firstlineno + 7}"


def test_trust_5_four_programs_storing_the_same_y_race(tmp_path: Path) -> None:
    trace = kb.record(race_kernel_case(ordered=False), tmp_path / "race.ktrace")
    df = hazards(load_ops(trace))
    assert set(df["hazard"]) == {"race_ww"}
    assert df.height == 6  # each store against every other PE's earlier store, once per pair
    assert {s.rsplit("/", 1)[-1] for s in [*df["src"], *df["other_src"]]} == {STORE_LINE}
    report = check(trace)
    assert report.exit_code == 1
    text = report.to_text()
    assert "both write hbm" in text and "dma_write @ " in text and STORE_LINE in text


def test_trust_5_the_same_stores_handed_on_round_the_ring_are_ordered(tmp_path: Path) -> None:
    trace = kb.record(race_kernel_case(ordered=True), tmp_path / "ordered.ktrace")
    report = check(trace)
    assert report.violated() == ["outputs_covered"]  # no race; but four programs write y
    assert "64 elements written by more than one program" in report.to_text()


@pytest.mark.parametrize("case,params", [
    ("gqa-decode", {"S_kv": 2048, "T_kv": 512}), ("gqa-prefill", {"S": 128, "T_kv": 64}),
    ("ring-attention", {"S_kv_per_rank": 128}),
    ("ring-attention", {"S_kv_per_rank": 128, "phase": "decode"}), ("softmax", {}),
])
def test_trust_5_builtin_cases_across_8_pes_have_no_race(traces, case, params) -> None:
    trace = kb.Trace.open(traces(case, **params))
    assert len(set(trace.ops["pe"])) == 8
    assert hazards(load_ops(trace)).height == 0


def test_every_hazard_has_a_message_template() -> None:
    assert set(HAZARDS) == {"raw", "dead_read", "uninit_read", "waw", "late_write", "war",
                            "war_xpe", "race_ww", "race_rw", "race_wr"}


# -- a brute-force oracle over random op logs ----------------------------------------------
def oracle(rows: list[dict[str, Any]]) -> set[tuple[str, int, int | None]]:
    """Byte-by-byte, pair-by-pair restatement of the hazard definitions."""
    hb = happens_before(rows)
    ev = []  # (op, pe, seq, kind 0 read/1 write/2 kill, space, mem_pe, lo, hi, t0, t1)
    seq: dict[int, int] = {}
    for i, r in enumerate(rows):
        pe = r.get("pe", 0)
        seq[pe] = seq.get(pe, -1) + 1
        t0, t1 = r["t"], r.get("end", r["t"] + r["busy"])
        for o in r.get("ins", []):
            ev.append((i, pe, seq[pe], 0, o["space"], o["pe"], o["addr"],
                       o["addr"] + o["shape"][0] * 4, t0, t1))
        if r.get("out"):
            o = r["out"]
            ev.append((i, pe, seq[pe], 1, o["space"], o["pe"], o["addr"],
                       o["addr"] + o["shape"][0] * 4, t0, t1))
        if r["name"] == "scope_exit":
            a = json.loads(r["attrs"])
            if a["hi"] > a["lo"]:
                ev.append((i, pe, seq[pe], 2, "tcm", pe, a["lo"], a["hi"], t0, t0))
    out = set()
    for e in ev:
        op, pe, sq, kind, space, mpe, lo, hi, t0, t1 = e
        for b in range(lo, hi):
            cover = [x for x in ev if x[4] == space and x[5] == mpe and x[6] <= b < x[7]]
            mine = [x for x in cover if x[1] == pe]
            before = [x for x in mine if (x[2], x[3]) < (sq, kind) and x[3] != 0]
            prev = max(before, key=lambda x: (x[2], x[3])) if before else None
            if kind == 0:
                if prev is None and space in ("tcm", "stage"):
                    out.add(("uninit_read", op, None))
                elif prev is not None and prev[3] == 2:
                    out.add(("dead_read", op, prev[0]))
                elif prev is not None and prev[9] > t0:
                    out.add(("raw", op, prev[0]))
                for w in cover:
                    if w[3] != 1:
                        continue
                    if w[1] == pe and w[2] > sq and w[9] < t1:
                        out.add(("war", op, w[0]))
                    if w[1] != pe and t0 < w[9] < t1:
                        out.add(("war_xpe", op, w[0]))
            elif prev is not None and prev[3] == 1:
                if kind == 1 and prev[9] > t1:
                    out.add(("waw", op, prev[0]))
                if kind == 2 and prev[9] > t0:
                    out.add(("late_write", op, prev[0]))
            if kind == 2 or space == "ipcq":
                continue
            # cross-PE: per other PE, the latest earlier-op_id access it conflicts with that
            # no path of program order and send -> recv edges orders either way
            for p in {x[1] for x in cover} - {pe}:
                racing = [x for x in cover if x[1] == p and x[0] < op and x[3] != 2
                          and 1 in (kind, x[3]) and not hb(x[0], op) and not hb(op, x[0])]
                if racing:
                    other = max(racing, key=lambda x: x[0])
                    out.add((RACES[(kind, other[3])], op, other[0]))
    return out


RACES = {(1, 1): "race_ww", (0, 1): "race_rw", (1, 0): "race_wr"}


def happens_before(rows: list[dict[str, Any]]):
    """``before(a, b)``: a path from op a to op b along program order (each PE's ops in list
    order) and send -> recv (the k-th send into an ipcq slot to the k-th recv from it)."""
    succ: dict[int, set[int]] = {i: set() for i in range(len(rows))}
    last: dict[int, int] = {}
    sends: dict[tuple, list[int]] = {}
    recvs: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        pe = r.get("pe", 0)
        if pe in last:
            succ[last[pe]].add(i)
        last[pe] = i
        if r["name"] == "send":
            sends.setdefault((r["out"]["pe"], r["out"]["addr"]), []).append(i)
        if r["name"] == "recv":
            recvs.setdefault((r["ins"][0]["pe"], r["ins"][0]["addr"]), []).append(i)
    for slot, rs in recvs.items():
        for s, r in zip(sends.get(slot, []), rs, strict=False):
            succ[s].add(r)

    def before(a: int, b: int) -> bool:
        seen, todo = set(), [a]
        while todo:
            for n in succ[todo.pop()] - seen:
                if n == b:
                    return True
                seen.add(n)
                todo.append(n)
        return False

    return before


KINDS = ("load", "exp", "store", "exit", "send", "recv") * 2 + ("load", "store", "send", "recv")


@st.composite
def op_logs(draw: st.DrawFn, kinds: tuple[str, ...] = KINDS, hbm: int = 6, most: int = 12
            ) -> list[dict[str, Any]]:
    """Random op logs on 3 PEs: ``kinds`` drawn from, hbm addresses 0..``hbm`` x 16."""
    rows = []
    for _ in range(draw(st.integers(1, most))):
        pe = draw(st.integers(0, 2))
        t = draw(st.integers(0, 60))
        busy = draw(st.integers(0, 20))
        end = t + busy + draw(st.integers(0, 40))
        a, b = (draw(st.integers(0, 6)) * 16 for _ in range(2))
        h = draw(st.integers(0, hbm)) * 16
        n = draw(st.integers(1, 3)) * 16
        kind = draw(st.sampled_from(kinds))
        slot = draw(st.sampled_from([0, 64]))
        if kind == "send":
            to = (pe + draw(st.integers(1, 2))) % 3
            rows.append(send(t, pe, to, slot, src=a))
            if draw(st.booleans()):  # received at once (a receive of this slot on ``to``)
                rows.append(recv(t + 50, to, slot, dst=b))
        elif kind == "recv":  # a recording is causal: a recv's send comes first
            def count(name: str, s: int, pe: int = pe) -> int:
                return sum(r["name"] == name and (r["out"] if name == "send" else r["ins"][0])
                           == operand("ipcq", s, 16, pe) for r in rows)
            pending = [s for s in (0, 64) if count("send", s) > count("recv", s)]
            # else from a slot no one sends to (matches nothing, orders nothing)
            rows.append(recv(t, pe, draw(st.sampled_from(pending)) if pending else 128, dst=b))
        elif kind == "load":
            rows.append(load(t, busy, end, h, b, n, pe))
        elif kind == "exp":
            rows.append(exp(t, a, b, n, pe, busy))
        elif kind == "store":
            rows.append(store(t, a, h, end, n, pe))
        else:
            rows.append(scope_exit(t, a, a + n, pe))
    return rows


@given(op_logs())
def test_matches_the_brute_force_oracle(rows: list[dict[str, Any]]) -> None:
    assert found(rows) == oracle(rows)


@given(op_logs(kinds=("load", "store", "send", "recv"), hbm=1, most=16))
def test_trust_5_cross_pe_order_matches_the_brute_force_oracle(rows: list[dict[str, Any]]
                                                               ) -> None:
    """Loads and stores of two hbm ranges on three PEs, ordered (or not) by messages."""
    assert found(rows) == oracle(rows)


def test_trust_5_ops_after_a_recv_row_are_issued_after_its_message_arrived(traces) -> None:
    """The order model relies on it: a recv_async row is logged where the kernel waits."""
    import polars as pl
    ops = kb.Trace.open(traces("ring-attention", S_kv_per_rank=128)).ops.sort("pe", "seq")
    nxt = ops.with_columns(nxt=pl.col("t_issue_ps").shift(-1).over("pe")).filter(
        (pl.col("name") == "recv") & pl.col("nxt").is_not_null())
    assert nxt.height > 0
    assert (nxt["nxt"] >= nxt["t_end_ps"]).all()
