"""SQL over ops, operands, tensors and (when replayed) values."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernbench.analyze import sql
from kernbench.errors import BadInputError
from kernbench.trace import Trace

from .conftest import write_values


def test_group_by_over_ops(traces) -> None:
    path = traces("gemm", N=256)
    res = sql(path, "SELECT name, count(*) AS n FROM ops GROUP BY name ORDER BY name")
    assert res.frame.rows() == [("dma_read", 6), ("dma_write", 4), ("dot", 4)]
    text = res.to_text()
    assert text.splitlines()[0].split() == ["name", "n"] and "(3 rows)" in text
    assert json.loads(res.to_json())[0] == {"name": "dma_read", "n": 6}


def test_struct_fields_and_flat_operands(traces) -> None:
    path = traces("gemm", N=256)
    out = sql(path, "SELECT op_id, output.space AS sp, output.addr AS a FROM ops "
                    "WHERE name = 'dma_write' ORDER BY op_id").frame
    assert set(out["sp"]) == {"hbm"} and out.height == 4
    moved = sql(path, "SELECT sum(o.nbytes) AS b FROM operands o JOIN ops USING (op_id) "
                      "WHERE ops.name = 'dma_read' AND o.role = 'in'").frame
    assert moved.item() == 6 * 65536


def test_tensors_and_values(traces, tmp_path: Path) -> None:
    dst = tmp_path / "r.ktrace"
    shutil.copytree(traces("scale-exp"), dst)
    with pytest.raises(BadInputError, match="values"):
        sql(dst, "SELECT * FROM values")
    write_values(dst, {i: i for i in range(Trace.open(dst).n_ops)})
    got = sql(dst, "SELECT count(*) AS n FROM values v JOIN ops USING (op_id) "
                   "WHERE ops.name = 'exp'").frame.item()
    assert got == Trace.open(dst).ops.filter(Trace.open(dst).ops["name"] == "exp").height
    assert sql(dst, "SELECT name FROM tensors ORDER BY name").frame["name"].to_list() == [
        "x", "y"]


def test_bad_query_is_bad_input(traces) -> None:
    with pytest.raises(BadInputError, match="sql: .*tables: operands, ops, shared, tensors"):
        sql(traces("scale-exp"), "SELECT nope FROM ops")


def test_sql_count_star_is_named_count(traces) -> None:
    path = traces("scale-exp")
    got = sql(path, "SELECT name, COUNT(*) FROM ops GROUP BY name ORDER BY COUNT(*), name")
    assert got.frame.columns == ["name", "count"]
    want = Trace.open(path).ops["name"].cast(str).value_counts()
    assert dict(got.frame.iter_rows()) == dict(want.iter_rows())
    # an alias, or a query that says len itself, keeps its own names
    assert sql(path, "SELECT COUNT(*) AS n FROM ops").frame.columns == ["n"]
    assert sql(path, "SELECT COUNT(*) AS len FROM ops").frame.columns == ["len"]


def test_sweep_sql_count_star_and_its_guard(tmp_path) -> None:
    from kernbench.sweep import resolve_spec, run_sweep
    from kernbench.sweep.query import sweep_sql

    run_sweep(resolve_spec("scale-exp", ["tile=512,1024"]), tmp_path / "S", workers=1)
    got = sweep_sql(tmp_path / "S", "SELECT point_id, COUNT(*) FROM ops GROUP BY point_id")
    assert got.frame.columns == ["point_id", "count"] and sorted(got.frame["count"]) == [48, 96]
    with pytest.raises(BadInputError, match="'read_csv' reads files or URLs"):
        sweep_sql(tmp_path / "S", "SELECT * FROM read_csv('/etc/hostname')")
