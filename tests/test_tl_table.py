"""``tl``'s table ops are written out by name (static: type checkers and IDEs see them); the
list is exactly the op table's ``tl=True`` entries, each with its family's calling
convention."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from kernbench import tl
from kernbench.schemas.ops import OPS, Family

TL = Path(__file__).resolve().parents[1] / "src" / "kernbench" / "tl.py"
FACTORY = {Family.UNARY: "_unary", Family.BINARY: "_binary", Family.REDUCE: "_reduce"}
PARAMS = {Family.UNARY: ["x"], Family.BINARY: ["x", "y"],
          Family.REDUCE: ["x", "axis", "keepdims"]}


def _static_table_ops() -> dict[str, tuple[str, str]]:
    """name -> (factory, Op member) of every ``name = _factory(Op.MEMBER)`` in tl.py."""
    out = {}
    for node in ast.parse(TL.read_text()).body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id in FACTORY.values()):
            arg = node.value.args[0]
            assert isinstance(arg, ast.Attribute)
            out[node.targets[0].id] = (node.value.func.id, arg.attr)  # type: ignore[attr-defined]
    return out


def test_every_tl_op_of_the_table_is_defined_statically_with_its_convention():
    table = {op.value: (FACTORY[spec.family], op.name) for op, spec in OPS.items() if spec.tl}
    assert _static_table_ops() == table


def test_the_table_ops_are_public_and_documented_from_the_table():
    table = [(op, spec) for op, spec in OPS.items() if spec.tl]
    assert {op.value for op, _ in table} >= {"exp", "sum", "maximum"}
    for op, spec in table:
        fn = getattr(tl, op.value)
        assert op.value in tl.__all__
        assert fn.__name__ == op.value and fn.__module__ == "kernbench.tl"
        assert spec.doc in fn.__doc__
        assert list(inspect.signature(fn).parameters) == PARAMS[spec.family]
