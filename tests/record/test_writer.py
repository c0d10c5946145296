"""The op writer's row shape is derived from the Arrow schema, the single source of truth."""

from __future__ import annotations

from kernbench.record.writer import DERIVED_FIELDS, ROW_FIELDS
from kernbench.schemas.arrow import OPS


def test_row_fields_plus_derived_fields_are_exactly_the_ops_schema():
    assert sorted(ROW_FIELDS + DERIVED_FIELDS) == sorted(OPS.names)
    assert [n for n in OPS.names if n not in DERIVED_FIELDS] == list(ROW_FIELDS)
