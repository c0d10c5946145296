"""The race detector: one synthetic case per hazard, boundaries, and a brute-force oracle."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

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
    rows = [load(0, 10, 500, 0, 0, pe=0), exp(0, 0, 64, pe=1) | {"ins": []},
            store(100, 64, 32, 300, n=16, pe=1)]
    assert found(rows) == {("war_xpe", 0, 2)}


def test_other_pe_write_at_window_edges_is_not_a_race() -> None:
    fill = exp(0, 0, 64, pe=1) | {"ins": []}
    assert found([load(100, 10, 500, 0, 0, pe=0), fill, store(10, 64, 0, 100, pe=1)]) == set()
    assert found([load(100, 10, 500, 0, 0, pe=0), fill, store(10, 64, 0, 500, pe=1)]) == set()


def test_every_hazard_has_a_message_template() -> None:
    assert set(HAZARDS) == {"raw", "dead_read", "uninit_read", "waw", "late_write", "war",
                            "war_xpe"}


# -- a brute-force oracle over random op logs ----------------------------------------------
def oracle(rows: list[dict[str, Any]]) -> set[tuple[str, int, int | None]]:
    """Byte-by-byte, pair-by-pair restatement of the hazard definitions."""
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
    return out


@st.composite
def op_logs(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for _ in range(draw(st.integers(1, 10))):
        pe = draw(st.integers(0, 1))
        t = draw(st.integers(0, 60))
        busy = draw(st.integers(0, 20))
        end = t + busy + draw(st.integers(0, 40))
        a, b = (draw(st.integers(0, 6)) * 16 for _ in range(2))
        n = draw(st.integers(1, 3)) * 16
        kind = draw(st.sampled_from(["load", "exp", "store", "exit"]))
        if kind == "load":
            rows.append(load(t, busy, end, a, b, n, pe))
        elif kind == "exp":
            rows.append(exp(t, a, b, n, pe, busy))
        elif kind == "store":
            rows.append(store(t, a, b, end, n, pe))
        else:
            rows.append(scope_exit(t, a, a + n, pe))
    return rows


@settings(max_examples=150, deadline=None)
@given(op_logs())
def test_matches_the_brute_force_oracle(rows: list[dict[str, Any]]) -> None:
    assert found(rows) == oracle(rows)
