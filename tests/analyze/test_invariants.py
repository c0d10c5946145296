"""Built-in invariants: clean traces pass; hand-edited traces fail, naming the op ids."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kernbench.analyze.check import check
from kernbench.analyze.invariants import INVARIANTS, TraceData, engine_overlap, run_invariants
from kernbench.errors import BadInputError, TraceFormatError
from kernbench.trace.hw import HwConfig

from .conftest import fake_ops, restamp, set_cell


def failing(report) -> dict[str, list[tuple[int | None, int | None]]]:
    return {i.name: [(v.op_id, v.other_op_id) for v in i.violations]
            for i in report.invariants if not i.ok}


@pytest.mark.parametrize("case,params", [
    ("scale-exp", {}), ("gemm", {"N": 256}), ("gemm", {"BN": 64}), ("softmax", {}),
])
def test_recorded_traces_pass(traces, case: str, params: dict) -> None:
    report = check(traces(case, **params))
    assert failing(report) == {}
    assert report.exit_code == 0
    assert [i.name for i in report.invariants] == list(INVARIANTS)


def _ops(path: Path) -> pl.DataFrame:
    return TraceData.load(__import__("kernbench").Trace.open(path)).ops


def test_two_ops_overlapping_on_one_engine(traces, edit_trace) -> None:
    src = traces("scale-exp")
    reads = _ops(src).filter((pl.col("pe") == 0) & (pl.col("name") == "dma_read"))
    first, second = reads["op_id"][0], reads["op_id"][1]
    t = int(reads["t_start_ps"][0]) + 1000  # inside the first read's busy window
    bad = edit_trace(src, lambda df: set_cell(df, second, t_issue_ps=t, t_start_ps=t))
    report = check(bad)
    assert failing(report) == {"engine_overlap": [(second, first)]}
    assert report.exit_code == 1
    text = report.to_text()
    assert f"op {second} starts on pe0 dma_rd" in text and f"op {first} holds it" in text
    assert "examples.py:" in text  # the kernel line of each op


def test_scratch_peak_over_budget(traces, edit_trace) -> None:
    src = traces("scale-exp")
    budget = HwConfig().kernel_scratch_bytes
    victim = 3
    bad = edit_trace(src, lambda df: set_cell(df, victim, scratch_cursor=budget + 16),
                     scratch_peak_bytes=budget + 16)
    report = check(bad)
    assert failing(report) == {"scratch_budget": [(victim, None)]}
    assert f"exceeds the budget of {budget} bytes" in report.to_text()


def test_read_before_its_producer_is_visible(traces, edit_trace) -> None:
    src = traces("scale-exp")
    ops = _ops(src)
    load = ops.filter(pl.col("name") == "dma_read").row(0, named=True)
    consumer = ops.filter((pl.col("pe") == load["pe"]) & (pl.col("seq") == load["seq"] + 1)
                          ).row(0, named=True)
    t = load["t_end_ps"] - 100_000  # before the load's data lands
    bad = edit_trace(src, lambda df: set_cell(df, consumer["op_id"], t_issue_ps=t,
                                              t_start_ps=t, t_end_ps=t + consumer["busy_ps"]))
    report = check(bad)
    assert failing(report) == {"data_race": [(consumer["op_id"], load["op_id"])]}
    v = next(i for i in report.invariants if i.name == "data_race").violations[0]
    assert v.message.startswith(f"op {consumer['op_id']} reads tcm@pe{load['pe']}")
    assert v.src.startswith("mul @ ") and v.other_src.startswith("dma_read @ ")


def test_time_order_and_dense_ids(traces, edit_trace) -> None:
    src = traces("scale-exp")
    bad = edit_trace(src, lambda df: set_cell(set_cell(df, 4, t_issue_ps=10**12), 5, seq=99))
    found = failing(check(bad, invariants=["time_order", "dense_ids"]))
    assert found == {"time_order": [(4, None)], "dense_ids": [(5, None)]}


def test_nbytes_inconsistent_with_shape(traces, edit_trace) -> None:
    bad = edit_trace(traces("scale-exp"), lambda df: set_cell(df, 1, nbytes=7))
    assert failing(check(bad, invariants=["nbytes_shapes"])) == {"nbytes_shapes": [(1, None)]}


def test_manifest_totals_must_match(traces, edit_trace) -> None:
    bad = edit_trace(traces("scale-exp"), lambda df: df, t_end_ps=1)
    report = check(bad, invariants=["manifest"])
    assert "manifest t_end_ps = 1 but the op log gives" in report.to_text()


def test_schema_types_are_checked(traces, edit_trace) -> None:
    bad = edit_trace(traces("scale-exp"), lambda df: df)
    table = pq.read_table(bad / "ops.parquet")
    i = table.schema.get_field_index("busy_ps")
    table = table.set_column(i, pa.field("busy_ps", pa.float64()),
                             table.column(i).cast(pa.float64()))
    pq.write_table(table, bad / "ops.parquet")
    restamp(bad)
    with pytest.raises(TraceFormatError, match="column 'busy_ps' is double, expected int64"):
        check(bad, invariants=["schema"])


def test_unsupported_schema_version_is_a_format_error(traces, edit_trace) -> None:
    bad = edit_trace(traces("scale-exp"), lambda df: df, schema_version=4)
    with pytest.raises(TraceFormatError, match="schema_version 4 is not supported"):
        check(bad)


def test_unknown_invariant_is_bad_input(traces) -> None:
    with pytest.raises(BadInputError, match="unknown invariants \\['nope'\\]"):
        check(traces("scale-exp"), invariants=["nope"])


def test_link_directions_are_separate_servers() -> None:
    def send(t: int, d: str) -> dict:
        return dict(name="send", t=t, busy=100, attrs=json.dumps({"dir": d}))

    ops = fake_ops([send(0, "next"), send(50, "prev"), send(60, "next")])
    data = TraceData(None, ops, HwConfig())  # type: ignore[arg-type]
    bad = engine_overlap(data)
    assert bad.select("op_id", "other_op_id").rows() == [(2, 0)]
    assert "pe0 link_tx[next]" in bad["message"][0]


def test_overlap_names_the_op_still_holding_the_engine() -> None:
    # op 0 holds math until 100; op 1 is short; op 2 overlaps op 0, not op 1
    rows = [dict(name="exp", t=0, busy=100), dict(name="exp", t=10, busy=5),
            dict(name="exp", t=50, busy=5), dict(name="exp", t=100, busy=5)]
    bad = run_invariants(TraceData(None, fake_ops(rows), HwConfig()),  # type: ignore[arg-type]
                         ["engine_overlap"])["engine_overlap"]
    assert bad.select("op_id", "other_op_id").rows() == [(1, 0), (2, 0)]


def test_composite_parent_and_children(traces, edit_trace) -> None:
    from .conftest import composite_ops

    ops = composite_ops()
    path = edit_trace(traces("scale-exp"), lambda df: ops, n_ops=ops.height,
                      t_end_ps=int(ops["t_end_ps"].max()), scratch_peak_bytes=0)
    # the synthetic op log stores nothing to the case's output y: only that is reported
    assert set(failing(check(path))) == {"outputs_covered"}
    orphan = edit_trace(path, lambda df: set_cell(df, 6, parent=0))
    assert failing(check(orphan, invariants=["parents"])) == {"parents": [(6, 0)]}
