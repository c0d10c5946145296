"""The op writer's row shape is derived from the Arrow schema, the single source of truth."""

from __future__ import annotations

from kernbench.record.commands import Cmd
from kernbench.record.writer import CMD_COLUMNS, DERIVED_FIELDS, ROW_FIELDS
from kernbench.schemas.arrow import OPS


def test_row_fields_command_columns_and_derived_fields_are_exactly_the_ops_schema():
    row_columns = [f for f in ROW_FIELDS if f != "cmd"]
    columns = row_columns + list(CMD_COLUMNS) + list(DERIVED_FIELDS)
    assert sorted(columns) == sorted(OPS.names)
    assert len(columns) == len(set(columns))
    assert set(CMD_COLUMNS.values()) <= set(Cmd._fields)
    assert ROW_FIELDS[-1] == "cmd"
