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
