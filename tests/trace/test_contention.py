"""shared.parquet in a trace: listed with its sha256, read through the one door, every row
checked by the validator, visible to sql; absent from ahbm-v1/v2 traces."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import kernbench as kb
from kernbench.analyze.sql import sql
from kernbench.errors import TraceFormatError
from kernbench.kernels.registry import build_case
from kernbench.schemas.arrow import SHARED
from kernbench.trace import Trace
from kernbench.trace.limits import TraceLimitError
from tests.conftest import add_shared

ROWS = [(0, "issue", "issue.pe0", 20_000), (3, "hbm", "hbm.ch3", 1_500),
        (3, "tcm", "tcm.pe0", 700), (5, "link", "link.pe0->pe1", 9)]


@pytest.fixture(scope="module")
def gemm(tmp_path_factory) -> Trace:
    return kb.record(build_case("gemm", {"N": 256}), tmp_path_factory.mktemp("c") / "g.ktrace")


@pytest.fixture
def copy(gemm, tmp_path):
    import shutil

    def make():
        dst = tmp_path / "t.ktrace"
        shutil.copytree(gemm.path, dst)
        return dst
    return make


def test_a_v1_trace_has_no_contention_file_and_an_empty_table(gemm):
    assert "shared.parquet" not in gemm.manifest["files"]
    assert not (gemm.path / "shared.parquet").exists()
    assert gemm.shared.height == 0 and gemm.shared.columns == SHARED.names
    res = sql(gemm, "SELECT count(*) AS n FROM shared")
    assert res.frame.item() == 0


def test_rows_round_trip_and_sql_sums_them_by_part(copy):
    path = copy()
    add_shared(path, ROWS)
    trace = Trace.open(path)
    got = [tuple(r.values()) for r in trace.shared.to_dicts()]
    assert got == ROWS
    res = sql(path, "SELECT part, sum(wait_ps) AS w FROM shared GROUP BY part ORDER BY part")
    assert res.frame.rows() == [("hbm", 1_500), ("issue", 20_000), ("link", 9), ("tcm", 700)]
    joined = sql(path, "SELECT o.name, s.resource FROM shared s JOIN ops o USING (op_id) "
                       "WHERE s.part = 'hbm'")
    assert joined.frame.rows() == [(trace.ops["name"][3], "hbm.ch3")]


def _table(**columns) -> pa.Table:
    base = {"op_id": [0, 1], "part": ["hbm", "tcm"], "resource": ["hbm.ch0", "tcm.pe0"],
            "wait_ps": [5, 6]}
    base.update(columns)
    part = pa.array(base["part"], pa.string()).dictionary_encode()
    arrays = [pa.array(base["op_id"], pa.int64()), part,
              pa.array(base["resource"], pa.string()), pa.array(base["wait_ps"], pa.int64())]
    fields = [pa.field(f.name, f.type) for f in SHARED]  # nullable: to write hostile nulls
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=SHARED.metadata))


@pytest.mark.parametrize("columns,needle", [
    ({"op_id": [0, 14]}, r"row 1 names op 14, not an op of the trace \(0..13\)"),
    ({"op_id": [-1, 0]}, "row 0 names op -1"),
    ({"part": ["hbm", "dram"]}, r"row 1 has part 'dram', not one of \('issue', 'hbm'"),
    ({"resource": ["hbm.ch0", ""]}, "row 1 has an empty resource"),
    ({"wait_ps": [5, -3]}, "row 1 has wait_ps -3, not in 0.."),
    ({"wait_ps": [None, 1]}, "row 0 has a null wait_ps"),
    ({"part": [None, "hbm"]}, "row 0 has a null part"),
    ({"resource": ["x", None]}, "row 1 has a null resource"),
])
def test_a_hostile_row_makes_the_trace_unreadable_in_one_line(copy, columns, needle):
    path = copy()
    add_shared(path, table=_table(**columns))
    with pytest.raises(TraceFormatError, match=needle) as info:
        Trace.open(path).validated()
    assert "\n" not in str(info.value) and "shared.parquet" in str(info.value)


def test_a_file_of_the_wrong_shape_is_refused_by_the_one_door(copy):
    path = copy()
    add_shared(path, table=_table().drop(["resource"]))
    with pytest.raises(TraceFormatError, match=r"missing columns \['resource'\]"):
        Trace.open(path).validated()


def test_an_unlisted_or_altered_file_is_refused(copy):
    path = copy()
    add_shared(path, ROWS)
    manifest = json.loads((path / "manifest.json").read_text())
    del manifest["files"]["shared.parquet"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TraceFormatError, match="present but not listed"):
        Trace.open(path)
    manifest["files"]["shared.parquet"] = "0" * 64
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TraceFormatError, match="sha256 does not match"):
        Trace.open(path)


def test_a_version_1_trace_may_list_it(copy):
    path = copy()
    add_shared(path, ROWS)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["schema_version"] == 1
    assert Trace.open(path).validated().shared.height == len(ROWS)


def test_more_rows_than_the_ops_can_wait_for_are_refused_before_reading(copy):
    path = copy()
    n = 14 * (2 + 16 + 2 * 9) + 65  # gemm: 14 ops on ahbm-v1 (16 channels, 8 PEs)
    add_shared(path, table=_table(op_id=[0] * n, part=["hbm"] * n, resource=["h"] * n,
                                  wait_ps=[1] * n))
    with pytest.raises(TraceLimitError, match=f"{n:,} rows, over the {n - 1:,}"):
        Trace.open(path).validated()


def test_a_recording_on_shared_hardware_lists_its_waits_and_v2_lists_none(tmp_path):
    case = build_case("gemm", {"N": 256})
    v3 = kb.record(case, tmp_path / "v3.ktrace", hw="ahbm-v3")
    v2 = kb.record(case, tmp_path / "v2.ktrace", hw="ahbm-v2")
    assert "shared.parquet" in v3.manifest["files"] and (v3.path / "shared.parquet").exists()
    assert "shared.parquet" not in v2.manifest["files"]
    assert not (v2.path / "shared.parquet").exists()
    rows = Trace.open(v3.path).shared
    assert rows.height and rows["wait_ps"].min() > 0
    assert set(rows["part"]) <= {"issue", "hbm", "tcm", "link"}
    assert rows["op_id"].max() < v3.n_ops
