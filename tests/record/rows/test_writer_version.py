"""The op writer asks for trace version 3 (ADR-0580) only when a batch holds an operand of a
version-3 dtype (int64, uint32, uint8, int16) or a bitcast: other traces keep their bytes."""

from __future__ import annotations

import pytest

from kernbench.record.rows.writer import uses_version_3


@pytest.mark.parametrize(("dtypes", "attrs", "want"), [
    ({"float32", "int32", "int8"}, ['{}', '{"dtype":"int32"}'], False),
    ({"float32", "int64"}, ['{}', '{}'], True),
    ({"float32", "uint32"}, ['{}'], True),
    ({"float32", "int32"}, ['{"bitcast":true,"dtype":"int32"}'], True),
    ({"float32"}, ['{"dtype":"int32","bitcast":', 'true}'], False),  # never across two rows
    (set(), [], False),
])
def test_the_writer_asks_for_version_3_only_for_new_dtypes_or_a_bitcast(dtypes, attrs, want):
    assert uses_version_3(dtypes, attrs) is want
