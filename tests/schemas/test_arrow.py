"""Schemas carry their format and version; readers reject an unknown major version."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kernbench as kb
from kernbench.errors import TraceFormatError
from kernbench.kernels.registry import build_case
from kernbench.schemas.arrow import META_KEY, OPS, SCHEMAS
from kernbench.trace.parquet import read_table


def test_every_schema_stamps_format_and_version_1():
    assert set(SCHEMAS) == {"kernbench-ops", "kernbench-access", "kernbench-shared",
                            "kernbench-stream", "kernbench-tensors", "kernbench-values",
                            "kernbench-outputs"}
    for fmt, schema in SCHEMAS.items():
        meta = json.loads(schema.metadata[META_KEY])
        assert meta == {"format": fmt, "schema_version": 1}


def test_ops_round_trip_keeps_schema_and_metadata(tmp_path):
    trace = kb.record(build_case("gemm"), tmp_path / "g.ktrace")
    table = read_table(trace.path / "ops.parquet", "kernbench-ops")
    assert table.schema.equals(OPS, check_metadata=False)
    assert json.loads(table.schema.metadata[META_KEY])["schema_version"] == 1
    dot = [r for r in table.to_pylist() if r["name"] == "dot"][0]
    a, b = dot["inputs"]
    assert a["space"] == "tcm" and a["shape"] == [128, 256] and a["dtype"] == "bfloat16"
    assert b["transposed"] is True and b["shape"] == [256, 128]
    assert dot["output"]["dtype"] == "float32"


def _restamp(path, version):
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[META_KEY] = json.dumps({"format": "kernbench-ops", "schema_version": version}).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def test_reader_rejects_unknown_major_version_naming_found_and_supported(tmp_path):
    trace = kb.record(build_case("scale-exp"), tmp_path / "s.ktrace")
    _restamp(trace.path / "ops.parquet", "2.0")
    with pytest.raises(TraceFormatError, match=r"schema_version '2.0' is not supported .*major "
                                               r"version 1"):
        read_table(trace.path / "ops.parquet", "kernbench-ops")


def test_minor_versions_of_major_1_are_read(tmp_path):
    trace = kb.record(build_case("scale-exp"), tmp_path / "s.ktrace")
    _restamp(trace.path / "ops.parquet", "1.3")
    assert read_table(trace.path / "ops.parquet", "kernbench-ops").num_rows == trace.n_ops


def test_a_parquet_file_without_kernbench_metadata_is_refused(tmp_path):
    pq.write_table(pa.table({"a": [1]}), tmp_path / "x.parquet")
    with pytest.raises(TraceFormatError, match="no 'kernbench' schema metadata"):
        read_table(tmp_path / "x.parquet", "kernbench-ops")


def test_manifest_with_unknown_version_is_refused(tmp_path):
    trace = kb.record(build_case("scale-exp"), tmp_path / "s.ktrace")
    m = json.loads((trace.path / "manifest.json").read_text())
    m["schema_version"] = 7
    (trace.path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TraceFormatError, match="schema_version 7 is not supported"):
        kb.Trace.open(trace.path)
