"""Issue 11, points 7, 9, 10, 11, 12 and 14: one test (or a few) named for each."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kernbench.analyze import check, diff, sql
from kernbench.analyze.diff import Threshold
from kernbench.cli import main
from kernbench.errors import BadInputError, TraceFormatError
from kernbench.replay import replay_in_process
from kernbench.trace.limits import LIMIT_ENV, TraceLimitError

from .conftest import restamp, set_cell

GOLDEN = Path(__file__).parents[2] / "traces"


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


def copy(tmp_path: Path, name: str = "softmax") -> Path:
    dst = tmp_path / f"{name}-copy.ktrace"
    shutil.copytree(GOLDEN / f"{name}.ktrace", dst)
    return dst


def edit_manifest(path: Path, **updates) -> None:
    m = json.loads((path / "manifest.json").read_text())
    for key, value in updates.items():
        *head, last = key.split("__")
        d = m
        for k in head:
            d = d[k]
        d[last] = value
    (path / "manifest.json").write_text(json.dumps(m))


# -- 7: diff -----------------------------------------------------------------------------

def test_trust_7_diff_counts_that_fall_are_negative(traces, edit_trace) -> None:
    src = traces("scale-exp")
    last = pl.read_parquet(src / "ops.parquet")["op_id"].max()
    shorter = edit_trace(src, lambda df: df.filter(pl.col("op_id") != last), n_ops=last)
    report = diff(src, shorter)
    fell = [r for r in report.by_op if r["d_count"]]
    assert fell and all(r["d_count"] == r["count_b"] - r["count_a"] == -1 for r in fell)
    code, out, _ = cli("diff", str(src), str(shorter))
    assert code == 0 and "4294967" not in out and "-1" in out


@pytest.mark.parametrize("spec,match", [
    ("latency=1", "latency_ps is a time; give a unit: %, ps, ns or us"),
    ("latency=+5", "give a unit"), ("dma_read_count=+1ns", "is not a time"),
    ("latency=+1ms", "expected KEY"),
])
def test_trust_7_fail_on_needs_a_unit(traces, spec: str, match: str) -> None:
    path = traces("scale-exp")
    with pytest.raises(BadInputError, match=match):
        diff(path, path, fail_on=[spec])
    code, _, err = cli("diff", str(path), str(path), "--fail-on", spec)
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_trust_7_fail_on_time_units(traces) -> None:
    a, b = traces("gemm", N=256), traces("gemm", N=512)
    la = diff(a, a).metrics_a["latency_ps"]
    lb = diff(b, b).metrics_a["latency_ps"]
    delta_ns = (lb - la) / 1000
    assert Threshold.parse("latency=+2us").amount == 2_000_000
    under, over = f"latency=+{delta_ns * 0.9:.3f}ns", f"latency=+{delta_ns * 1.1:.3f}ns"
    assert diff(a, b, fail_on=[under]).exit_code == 1
    assert diff(a, b, fail_on=[over]).exit_code == 0
    assert diff(a, b, fail_on=["dma_read_count=+0"]).exit_code == 1  # counts: no unit


# -- 9: sql --------------------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('/etc/shadow')",
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_parquet('http://127.0.0.1:9/x.parquet')",
    "SELECT * FROM READ_JSON('{secret}')",
    'SELECT * FROM "read_csv"(\'{secret}\')',
    "SELECT * FROM ops, read_ipc('{secret}')",
    "SELECT * FROM read_csv/**/('{secret}')",
    "SELECT * FROM ops WHERE name IN (SELECT * FROM read_ndjson('{secret}'))",
])
def test_trust_9_sql_reaches_only_the_trace_tables(tmp_path: Path, query: str) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    code, out, err = cli("sql", str(GOLDEN / "softmax.ktrace"), query.format(secret=secret))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "reads files or URLs" in err and "hunter2" not in out + err


def test_trust_9_sql_still_answers_queries(tmp_path: Path) -> None:
    path = GOLDEN / "softmax.ktrace"
    ops = pl.read_parquet(path / "ops.parquet")
    res = sql(path, "SELECT name, count(*) AS n FROM ops -- read_csv('x')\n"
              "WHERE attrs NOT LIKE '%read_parquet(%' GROUP BY name ORDER BY name")
    want = ops.group_by("name").len().sort("name")
    assert res.frame["n"].to_list() == want["len"].to_list()
    with pytest.raises(BadInputError, match="'nope' is a table function"):
        sql(path, "SELECT * FROM nope(1)")


# -- 10: size limits ----------------------------------------------------------------------

def test_trust_10_tensor_bytes_over_the_limit(tmp_path: Path) -> None:
    path = copy(tmp_path)
    t = pq.read_table(path / "tensors.parquet")
    shapes = t.column("shape").to_pylist()
    shapes[0] = [1 << 20, 1 << 20]  # a 3 KB file naming 4 TiB of float32
    i = t.schema.get_field_index("shape")
    pq.write_table(t.set_column(i, t.schema.field(i), pa.array(shapes, pa.list_(pa.int64()))),
                   path / "tensors.parquet")
    restamp(path)
    with pytest.raises(TraceLimitError, match="HBM tensors.*needs 8.19e\\+03 GiB, over the 4 "
                       "GiB limit \\(set KERNBENCH_MAX_MEMORY_GB"):
        replay_in_process(path)
    code, _, err = cli("check", str(path))
    assert code == 2 and "KERNBENCH_MAX_MEMORY_GB" in err


@pytest.mark.parametrize("field,value", [("kernel_scratch_kib", 1 << 40), ("stage_kib", 1 << 33),
                                         ("ipcq_slot_kib", 1 << 36)])
def test_trust_10_hw_memories_over_the_limit(tmp_path: Path, field: str, value: int) -> None:
    path = copy(tmp_path)
    edit_manifest(path, **{f"hw__{field}": value})
    with pytest.raises(TraceLimitError, match="hw memories"):
        replay_in_process(path)


def test_trust_10_rows_must_equal_n_ops_before_reading(tmp_path: Path) -> None:
    path = copy(tmp_path)
    t = pq.read_table(path / "ops.parquet")
    pq.write_table(pa.concat_tables([t] * 50), path / "ops.parquet")
    restamp(path)
    with pytest.raises(TraceFormatError, match="4,000 rows but the manifest says n_ops = 80"):
        check(path)


def test_trust_10_limit_is_overridable(tmp_path: Path, monkeypatch) -> None:
    path = GOLDEN / "softmax.ktrace"
    monkeypatch.setenv(LIMIT_ENV, "0.00001")  # 10 KiB: the softmax tensors need 32 KiB
    code, _, err = cli("report", str(path))
    assert code == 2 and "over the 1e-05 GiB limit" in err
    monkeypatch.setenv(LIMIT_ENV, "lots")
    code, _, err = cli("check", str(path))
    assert code == 2 and "KERNBENCH_MAX_MEMORY_GB='lots' is not a positive number" in err
    monkeypatch.setenv(LIMIT_ENV, "64")
    assert cli("check", str(path))[0] == 0


# -- 11: one validator, no traceback --------------------------------------------------------

def _retype(path: Path, column: str, typ: pa.DataType) -> None:
    t = pq.read_table(path / "ops.parquet")
    i = t.schema.get_field_index(column)
    pq.write_table(t.set_column(i, pa.field(column, typ), t.column(i).cast(typ)),
                   path / "ops.parquet")


@pytest.mark.parametrize("corrupt,match", [
    (lambda p: _retype(p, "busy_ps", pa.float64()), "column 'busy_ps' is double"),
    (lambda p: pq.write_table(pq.read_table(p / "ops.parquet").drop_columns(["src"]),
                              p / "ops.parquet"), "missing columns \\['src'\\]"),
    (lambda p: pq.write_table(pq.read_table(p / "ops.parquet").replace_schema_metadata(
        {b"kernbench": b"\x80\x04\x95pickle"}), p / "ops.parquet"), "not UTF-8 text"),
    (lambda p: edit_manifest(p, files=["ops.parquet"]), "field 'files' is list"),
    (lambda p: _retype(p, "t_end_ps", pa.float64()), "column 't_end_ps' is double"),
])
@pytest.mark.parametrize("command", ["check", "report", "export", "diff", "sql"])
def test_trust_11_one_line_for_every_command(tmp_path: Path, corrupt, match: str,
                                             command: str) -> None:
    path = copy(tmp_path)
    corrupt(path)
    if isinstance(json.loads((path / "manifest.json").read_text())["files"], dict):
        restamp(path)
    args = {"check": [], "report": [], "export": ["-o", str(tmp_path / "t.json")],
            "diff": [str(GOLDEN / "softmax.ktrace")], "sql": ["SELECT 1 AS x FROM ops"]}
    code, _, err = cli(command, str(path), *args[command])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(match, err), err


# -- 12: check runs the same validator ------------------------------------------------------

def _operand_addr(df: pl.DataFrame, addr: int) -> pl.DataFrame:
    first = df.filter(pl.col("name") == "dma_read")["op_id"][0]
    rows = df["inputs"].to_list()
    rows[first] = [dict(rows[first][0], addr=addr)]
    return df.with_columns(inputs=pl.Series(rows, dtype=df.schema["inputs"]))


@pytest.mark.parametrize("edit,invariant,text", [
    (lambda df: _operand_addr(df, -64), "schema", "outside the format"),
    (lambda df: _operand_addr(df, 1 << 30), "hbm_bounds", "outside every tensor"),
    (lambda df: set_cell(df, 1, name="frobnicate"), "schema", "unknown op name(s) ['frobnicate']"),
    (lambda df: set_cell(df, 1, attrs="{nope"), "schema", "is not a JSON object"),
    (lambda df: set_cell(df, 1, t_end_ps=-5), "schema", "negative or absurd time"),
    # softmax (op 2) starts before the load it reads (op 1) lands: a timing-model bug
    (lambda df: set_cell(df, 2, t_start_ps=507_999), "time_order", "t_issue 508000 t_start 507999"),
    (lambda df: df.with_columns(seq=pl.lit(0, pl.Int64)), "dense_ids", "has seq 0, expected"),
    (lambda df: df.with_columns(op_id=pl.when(pl.col("op_id") == 2).then(1)
                                .otherwise(pl.col("op_id"))), "dense_ids", "row 2 has op_id 1"),
])
def test_trust_12_check_fails_what_replay_rejects(traces, edit_trace, edit, invariant: str,
                                                  text: str) -> None:
    bad = edit_trace(GOLDEN / "softmax.ktrace", edit)
    report = check(bad)
    failed = {i.name: i for i in report.invariants if not i.ok}
    assert report.exit_code == 1 and invariant in failed
    assert any(text in v.message for v in failed[invariant].violations)
    if invariant in ("hbm_bounds", "time_order"):  # replay runs it and shows the damage
        assert replay_in_process(bad).status == "failed"
    elif "seq" in text:  # bookkeeping only diff relies on: diff refuses, replay runs
        with pytest.raises(TraceFormatError, match="seq is not dense per PE"):
            diff(bad, bad)
    else:  # the format is broken: the rest of check is skipped, replay refuses
        assert any(i.skipped for i in report.invariants)
        with pytest.raises(TraceFormatError, match="invalid trace .*`kernbench check` lists"):
            replay_in_process(bad)
    code, out, _ = cli("check", str(bad))
    assert code == 1 and "FAIL" in out


def test_trust_12_null_times_and_absurd_hw(tmp_path: Path) -> None:
    path = copy(tmp_path)
    t = pq.read_table(path / "ops.parquet")
    i = t.schema.get_field_index("t_start_ps")
    col = pa.array([None] + t.column(i).to_pylist()[1:], pa.int64())
    pq.write_table(t.set_column(i, pa.field("t_start_ps", pa.int64()), col),
                   path / "ops.parquet")
    restamp(path)
    report = check(path)
    assert report.exit_code == 1
    assert "op 0 has a null t_start_ps" in report.to_text()
    edit_manifest(path, hw__n_pe=-3)
    with pytest.raises(TraceFormatError, match="n_pe must be a non-negative number, got -3"):
        check(path)


# -- 14: a corrupt replay/values.parquet -----------------------------------------------------

def test_trust_14_corrupt_values_is_a_warning(tmp_path: Path) -> None:
    path = copy(tmp_path)
    (path / "replay").mkdir()
    (path / "replay" / "values.parquet").write_bytes(b"PAR1 not really")
    code, out, err = cli("sql", str(path), "SELECT count(*) AS n FROM ops")
    assert code == 0 and "80" in out
    assert err.startswith("kernbench: warning: ignoring ") and "values.parquet" in err
    code, out, err = cli("diff", str(path), str(GOLDEN / "softmax.ktrace"))
    assert code == 0 and "values.parquet" in err and "not compared" in out
    code, _, err = cli("sql", str(path), "SELECT * FROM values")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "relation 'values' was not found" in err and "ignoring " in err
