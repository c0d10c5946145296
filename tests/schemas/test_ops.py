"""One op vocabulary: every op has a kind, an engine and a timing model."""

from __future__ import annotations

import pytest

from kernbench.record.timing import TIMING
from kernbench.schemas import ops
from kernbench.schemas.ops import ENGINE, KIND, OP, Op


@pytest.mark.parametrize("op", list(Op))
def test_every_op_has_kind_engine_timing_model_and_numpy_executor(op):
    from kernbench.replay.executors import EXECUTORS

    assert op in KIND and op in ENGINE and op in TIMING
    assert callable(TIMING[op]) and callable(EXECUTORS[op].bind)


def test_fast_member_namespace_is_the_enum():
    for op in Op:
        assert getattr(OP, op.name) is op


def test_groups_partition_sensibly():
    assert ops.BINARY & ops.UNARY == frozenset()
    assert ops.MEMORY <= ops.DATA_OPS and ops.SCOPE.isdisjoint(ops.DATA_OPS)
