"""The op table: every op is complete, and every op records and replays once.

The parameter lists come from ``OPS``, so a new table op is covered here without edits.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.record.lowering import semantics
from kernbench.record.machine.timing import TIMING
from kernbench.replay import replay
from kernbench.replay.executors import EXECUTORS
from kernbench.schemas import ops, rules
from kernbench.schemas.ops import ENGINE, KIND, OP, OPS, Dt, Family, Op
from kernbench.schemas.ops_markdown import markdown

#: families whose value is the op's numpy function applied elementwise / by reduce
ELEMENTWISE = (Family.UNARY, Family.BINARY, Family.REDUCE)
TABLE_OPS = [op for op, s in OPS.items() if s.family in ELEMENTWISE]


@pytest.mark.parametrize("op", list(Op))
def test_every_op_has_a_spec_kind_engine_timing_model_and_numpy_executor(op):
    spec = OPS[op]
    assert spec.op is op and spec.doc
    assert KIND[op] is spec.kind and ENGINE[op] is spec.engine
    assert callable(TIMING[op]) and callable(EXECUTORS[op].bind)
    if spec.family in ELEMENTWISE:
        assert callable(spec.numpy), f"{op} has no numpy implementation"


@pytest.mark.parametrize("op", [op for op, s in OPS.items() if s.tl])
def test_table_ops_with_tl_true_are_tl_functions_named_after_the_op(op):
    fn = getattr(tl, op.value)
    assert fn.__name__ == op.value and op.value in tl.__all__
    assert OPS[op].doc in fn.__doc__


def test_fast_member_namespace_is_the_enum():
    assert sorted(vars(OP)) == sorted(op.name for op in Op) and len(Op) == len(OPS)
    for op in Op:
        assert getattr(OP, op.name) is op


def test_groups_are_derived_from_the_table():
    assert ops.BINARY & ops.UNARY == frozenset()
    assert ops.MEMORY <= ops.DATA_OPS and ops.SCOPE.isdisjoint(ops.DATA_OPS)
    assert ops.COMPARISONS == {op for op in ops.BINARY if OPS[op].dtype is ops.Dt.BOOL}
    assert ops.TRANSCENDENTAL == {op for op, s in OPS.items()
                                  if s.cost is ops.Cost.TRANSCENDENTAL}


def test_the_markdown_table_has_one_row_per_op():
    lines = markdown().splitlines()
    assert len(lines) == 2 + len(OPS)
    assert all(f"| `{op.value}` |" in "\n".join(lines) for op in Op)


@pytest.mark.parametrize(("shapes", "attrs", "want"), [
    ([(4, 1), (1, 8)], {}, (4, 8)),
    ([(3, 5)], {"axis": 1, "keepdims": True}, (3, 1)),
    ([(3, 5)], {"axis": None, "keepdims": False}, (1,)),
])
def test_inference_gives_numpys_shapes(shapes, attrs, want):
    op = Op.ADD if len(shapes) == 2 else Op.SUM
    shape, dt = rules.infer(op, shapes, [kb.tl.float32] * len(shapes), attrs)
    assert shape == want and dt is kb.tl.float32


def test_inference_rejects_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"shapes \[4, 3\] and \[4\] do not broadcast"):
        rules.infer(Op.MUL, [(4, 3), (4,)], [kb.tl.float32] * 2, {})


# -- record and replay every table op once ---------------------------------------------------
ROWS, COLS = 4, 32


@kb.kernel
def one_op(x, z, y, *, op: str):
    spec = OPS[Op(op)]
    a = tl.load(x, (ROWS, COLS), tl.float32)
    if spec.ints:  # integer-only ops (bitwise, shifts, //) get small positive integers
        a = (a * 4.0).to(tl.int32)
    if spec.family is Family.UNARY:
        r = getattr(tl, op)(a) if spec.tl else semantics.unary(spec.op, a)
    elif spec.family is Family.BINARY:
        b = tl.load(z, (ROWS, COLS), tl.float32)
        if spec.ints:
            b = (b * 2.0).to(tl.int32)
        r = getattr(tl, op)(a, b) if spec.tl else semantics.binary(spec.op, a, b)
    else:
        r = getattr(tl, op)(a, axis=1) if spec.tl else semantics.reduce(spec.op, a, 1)
    tl.store(y, r.to(tl.float32))


def _expected(op: Op, x: np.ndarray, z: np.ndarray) -> np.ndarray:
    spec = OPS[op]
    if spec.ints:
        x, z = (x * 4.0).astype(np.int32), (z * 2.0).astype(np.int32)
    with np.errstate(all="ignore"):
        if spec.family is Family.UNARY:
            r = spec.numpy(x)
        elif spec.family is Family.BINARY:
            r = spec.numpy(x, z)
        else:
            r = spec.numpy.reduce(x, axis=1)
    return np.asarray(r).astype(np.float32).reshape(-1)


def one_op_case(op: str = "exp") -> kb.Case:
    out = (ROWS,) if OPS[Op(op)].family is Family.REDUCE else (ROWS, COLS)
    return kb.Case(
        name=f"op-{op}", kernel=one_op, grid=(1,),
        tensors={"x": kb.tensor((ROWS, COLS), "float32",
                                init=kb.data(_positive(1))),
                 "z": kb.tensor((ROWS, COLS), "float32", init=kb.data(_positive(2))),
                 "y": kb.tensor(out, "float32", role="output")},
        params={"op": op},
        reference=lambda x, z: {"y": _expected(Op(op), x, z).reshape(out)},
    )


def _positive(seed: int) -> np.ndarray:
    """Inputs inside every op's domain (log, sqrt, rsqrt need positive values)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.25, 2.0, (ROWS, COLS)).astype(np.float32)


@pytest.mark.parametrize("op", TABLE_OPS)
def test_every_table_op_records_and_replays_to_its_numpy_definition(tmp_path, op):
    case = one_op_case(op.value)
    trace = kb.record(case, out=tmp_path / "t.ktrace")
    names = set(trace.ops["name"].cast(str))
    assert op.value in names
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.verified, res.verdict
    assert res.verdict["outputs"]["y"]["checked"]


def test_every_other_op_is_recorded_and_replayed_by_a_golden_case(tmp_path):
    """Memory, GEMM, IPCQ, scope, composite, creation and layout ops: the golden cases (which
    tests/test_golden.py re-records) cover each; replaying them here verifies every one."""
    import shutil
    from pathlib import Path

    traces = Path(__file__).resolve().parents[2] / "traces"
    # version-2 ops cannot be in the (version 1) goldens: tests/replay/test_indexed.py and
    # tests/schemas/test_ops_v2.py record and replay each of them
    rest = {op.value for op in Op} - {op.value for op in TABLE_OPS} - {
        op.value for op in ops.VERSION_2}
    chosen = []
    for path in sorted(traces.glob("*.ktrace")):
        names = set(kb.Trace.open(path).ops["name"].cast(str)) & rest
        if names:
            chosen.append(path)
            rest -= names
    assert not rest, f"ops no golden trace exercises: {sorted(rest)}"
    for path in chosen:
        copy = shutil.copytree(path, tmp_path / path.name)
        res = replay(copy, in_process=True)
        assert res.verified, (path.name, res.verdict)


DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_trace_format_doc_names_only_ops_and_families_of_the_table():
    text = (DOCS / "trace-format.md").read_text()
    section = text[text.index("## Op semantics"):text.index("## Timing columns")]
    names = set()
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| name") and "---" not in line:
            names |= set(re.findall(r"`([a-z_0-9]+)`", line.split("|")[1]))
    families = {f.value for f in Family}
    assert names and names <= {op.value for op in Op} | families


def test_the_hardware_model_doc_prices_every_cost_class():
    text = (DOCS / "hardware-model.md").read_text()
    section = text[text.index("## Cost classes"):]
    assert {c.value for c in ops.Cost} <= set(re.findall(r"^\| `([a-z_]+)`", section, re.M)) | {
        c for row in re.findall(r"^\| `([a-z_]+)` / `([a-z_]+)`", section, re.M) for c in row}


@pytest.mark.parametrize("op", [op for op in TABLE_OPS if OPS[op].family is Family.UNARY
                                and OPS[op].numpy is not None])
def test_unary_ops_take_a_zero_dimensional_operand(op):
    """A reduced scalar (``tl.sum(x, axis=0)``) is a 0-d array: every unary op's numpy
    definition gives the value it gives on a one-element array."""
    fn = OPS[op].numpy
    x = np.asarray(np.float32(0.75) if OPS[op].dtype is Dt.FLOAT else np.int32(5))
    got, want = np.asarray(fn(x)), np.asarray(fn(x.reshape(1)))
    assert got.shape == () and got.reshape(1).tolist() == want.tolist(), op
