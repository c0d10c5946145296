"""The async start rule, op by op: under ``async`` issue an op starts at the latest of its
issue, its engine being free (issue order), its inputs visible (RAW) and its output range
free (WAR, WAW), through TCM and, within the program, through HBM. Random op sequences are
recorded on ahbm-v2 and every row's ``t_start_ps`` is recomputed from the rows alone."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernbench as kb
from kernbench import tl

N = 256  # elements of every tile
BUFS = 3  # persistent TCM buffers the sequence loads into, computes into and stores from


@kb.kernel
def sequence(x, y, *, steps: str):
    """One op per character pair: ``l`` load HBM tile j into buffer i, ``m`` buffer i =
    exp(buffer j), ``a`` buffer i = buffer i + buffer j, ``s`` store buffer i at tile j."""
    bufs = [tl.load(x + k * N, (N,), tl.float32) for k in range(BUFS)]
    for k in range(0, len(steps), 3):
        op, i, j = steps[k], int(steps[k + 1]), int(steps[k + 2])
        if op == "l":
            tl.load(x + j * N, (N,), tl.float32, out=bufs[i])
        elif op == "m":
            tl.copy_to(bufs[i], tl.exp(bufs[j]))
        elif op == "a":
            tl.copy_to(bufs[i], bufs[i] + bufs[j])
        else:
            tl.store(y + j * N, bufs[i])


STEP = st.tuples(st.sampled_from("lmas"), st.integers(0, BUFS - 1), st.integers(0, BUFS - 1))
ITEMSIZE = {"float32": 4}


def _extent(operand: dict) -> tuple[tuple, int, int]:
    n = 1
    for s in operand["shape"]:
        n *= s
    return ((operand["space"], operand["pe"]), operand["addr"],
            operand["addr"] + n * ITEMSIZE[operand["dtype"]])


def _overlaps(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def expected_starts(ops: pl.DataFrame) -> list[int]:
    """The start of every row by the async start rule, from earlier rows only (emission order)."""
    done: list[dict] = []
    engine_free: dict[str, int] = {}
    starts = []
    for row in ops.sort("op_id").to_dicts():
        reads = [_extent(o) for o in row["inputs"]]
        writes = [_extent(row["output"])] if row["output"] is not None else []
        t = row["t_issue_ps"]
        if row["engine"] != "none":
            t = max(t, engine_free.get(row["engine"], 0))
        for prev in done:
            if any(_overlaps(r, w) for r in reads for w in prev["writes"]):  # RAW
                t = max(t, prev["t_end_ps"])
            if any(_overlaps(w, o) for w in writes for o in prev["reads"] + prev["writes"]):
                t = max(t, prev["t_end_ps"])  # WAR, WAW
        starts.append(t)
        if row["engine"] != "none":
            engine_free[row["engine"]] = row["t_start_ps"] + row["busy_ps"]
        done.append({"reads": reads, "writes": writes, "t_end_ps": row["t_end_ps"]})
    return starts


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(STEP, min_size=1, max_size=24))
def test_every_async_op_starts_by_the_spec_start_rule(tmp_path_factory, steps) -> None:
    code = "".join(f"{op}{i}{j}" for op, i, j in steps)
    case = kb.Case(name="seq", kernel=sequence, grid=(1,),
                   tensors={"x": kb.tensor((BUFS * N,), "float32"),
                            "y": kb.tensor((BUFS * N,), "float32", init=kb.zeros())},
                   params={"steps": code})
    trace = kb.record(case, tmp_path_factory.mktemp("seq") / "s.ktrace", hw="ahbm-v2")
    ops = trace.ops.with_columns(pl.col("engine").cast(pl.String))
    assert ops.sort("op_id")["t_start_ps"].to_list() == expected_starts(ops)
