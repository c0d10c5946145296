"""The op writer asks for trace version 3 (ADR-0580) only when a batch holds an operand of a
version-3 dtype (int64, uint32, uint8, int16) or a bitcast: other traces keep their bytes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kernbench.record.writer import uses_version_3
from kernbench.schemas.arrow import OPERAND


def _operands(*names: str | None) -> pa.Array:
    rows = [None if n is None else {"space": "tcm", "pe": 0, "addr": 0, "shape": [4],
                                    "dtype": n, "transposed": False} for n in names]
    return pa.array(rows, OPERAND)


@pytest.mark.parametrize(("ins", "out", "attrs", "want"), [
    (["float32", "int32"], ["int8", None], ['{}', '{"dtype":"int32"}'], False),
    (["float32", "int64"], ["float32", None], ['{}', '{}'], True),
    (["float32"], ["uint32"], ['{}'], True),
    (["float32"], ["int32"], ['{"bitcast":true,"dtype":"int32"}'], True),
])
def test_the_writer_asks_for_version_3_only_for_new_dtypes_or_a_bitcast(ins, out, attrs, want):
    flat = _operands(*ins)
    offsets = pa.array([0, len(ins) // 2, len(ins)] if len(out) == 2 else [0, len(ins)],
                       pa.int32())
    inputs = pa.ListArray.from_arrays(offsets, flat)
    assert uses_version_3(inputs, _operands(*out), pa.array(attrs, pa.string())) is want
