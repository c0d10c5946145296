"""Trace format version 2: readers accept versions 1 and 2, the validator checks indexed
rows (access ids, shapes, bounds), and check's invariants understand element operands."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kernbench as kb
from kernbench.analyze import check
from kernbench.errors import TraceFormatError
from kernbench.record.lowering import addressing as ix
from tests.conftest import rewrite_ops


@kb.kernel
def cols(x, y):
    j = kb.tl.program_id(0)
    c = ix.load_indexed(x.tensor, np.arange(8) * 4 + j, src="c:1")
    ix.store_indexed(y.tensor, np.arange(8) * 4 + j, c * 2.0, np.arange(8) < 7, src="c:2")


def _cols(tmp_path, name="c") -> kb.Trace:
    case = kb.Case(name=name, kernel=cols, grid=(4,),
                   tensors={"x": kb.tensor((8, 4), "float32"),
                            "y": kb.tensor((8, 4), "float32", role="output")})
    return kb.record(case, out=tmp_path / f"{name}.ktrace")


def test_column_tiles_written_by_different_pes_are_not_races(tmp_path):
    report = check(_cols(tmp_path))
    assert report.exit_code == 0, report.to_text()


def test_atomics_from_every_pe_on_one_tensor_are_not_races(tmp_path):
    @kb.kernel
    def acc(t):
        ix.atomic("add", t.tensor, np.arange(4), 1.0, src="a:1")

    case = kb.Case(name="a", kernel=acc, grid=(8,),
                   tensors={"t": kb.tensor((4,), "float32", role="output")})
    report = check(kb.record(case, out=tmp_path / "a.ktrace"))
    assert report.exit_code == 0, report.to_text()


def test_overlapping_strided_writes_from_two_pes_are_still_races(tmp_path):
    @kb.kernel
    def clash(y):
        ix.store_indexed(y.tensor, np.arange(4) * 2, 1.0, src="w:1")

    case = kb.Case(name="w", kernel=clash, grid=(2,),
                   tensors={"y": kb.tensor((8,), "float32", role="output")})
    report = check(kb.record(case, out=tmp_path / "w.ktrace"))
    assert report.exit_code == 1 and "both write hbm" in report.to_text()


@pytest.mark.parametrize(("attrs", "rule", "match"), [
    ({"strides": [4, 1]}, "schema", r"strides \[4, 1\] do not fit the tile \[8\]"),
    ({"access": 99}, "schema", r"access id 99 is not in access.parquet"),
    ({"strides": [5]}, "hbm_bounds", r"moves hbm elements \[\d+, \d+\) outside the tensor"),
])
def test_hostile_indexed_attrs_are_findings(tmp_path, attrs, rule, match):
    trace = _cols(tmp_path)

    def edit(rows):
        rows[0]["attrs"] = json.dumps(attrs)

    rewrite_ops(trace.path, edit)
    t = kb.Trace.open(trace.path, strict=False)
    assert t.validation.count(rule) == 1
    assert t.validation.rule(rule)["message"].str.contains(match).all()
    if rule == "schema":
        with pytest.raises(TraceFormatError, match="invalid trace"):
            kb.Trace.open(trace.path).ops  # noqa: B018


def test_a_hostile_mask_id_is_a_schema_finding(tmp_path):
    trace = _cols(tmp_path)

    def edit(rows):
        rows[1]["attrs"] = json.dumps({"mask": 5, "strides": [4]})

    rewrite_ops(trace.path, edit)
    found = kb.Trace.open(trace.path, strict=False).validation.rule("schema")
    assert found["message"].str.contains("access id 5 is not in access.parquet").all()


@pytest.mark.parametrize("version", [4, "4.0", True])
def test_manifest_versions_other_than_1_to_3_are_refused(tmp_path, version):
    trace = _cols(tmp_path)
    m = json.loads((trace.path / "manifest.json").read_text())
    assert m["schema_version"] == 2
    m["schema_version"] = version
    (trace.path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TraceFormatError, match="reads major versions 1, 2, 3"):
        kb.Trace.open(trace.path)


def test_a_modified_access_parquet_fails_the_manifest_sha(tmp_path):
    trace = _cols(tmp_path)
    with open(trace.path / "access.parquet", "ab") as f:
        f.write(b"x")
    with pytest.raises(TraceFormatError, match="access.parquet: sha256 does not match"):
        kb.Trace.open(trace.path)


def test_strided_tiles_repeat_their_offsets_read_only_and_still_refuse_out_of_range():
    from kernbench.schemas import elements
    from kernbench.schemas.offsets import OffsetError

    shape, strides = (4, 3), [7, -2]
    want = 5 + np.arange(4)[:, None] * 7 + np.arange(3)[None, :] * -2
    first, again = elements.strided(shape, strides, 5), elements.strided(shape, strides, 5)
    assert np.array_equal(first, want) and np.array_equal(again, want)
    assert not again.flags.writeable
    assert np.array_equal(elements.strided(shape, [7, -2], 6), want + 1)  # base is in the key
    with pytest.raises(OffsetError, match="stride"):
        elements.strided(shape, [7, 1 << 60], 5)
