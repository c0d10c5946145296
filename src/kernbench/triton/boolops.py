"""Python's ``and`` / ``or`` / ``not`` in a kernel body, as Triton's compiler reads them.

Python cannot overload them, so the front end rewrites a kernel's source once (an AST
rewrite compiled against the kernel's own file and line numbers, so every op's ``src`` and
every error still names the user's line): ``a and b`` becomes ``_kb_and_(lambda: a, lambda:
b)``, ``not x`` becomes ``_kb_not_(x)``. The helpers follow ``CodeGenerator.visit_BoolOp`` /
``visit_UnaryOp``: operands are evaluated left to right; a Python value (a constexpr)
short-circuits as in Python; Triton values do not short-circuit and are combined with
``logical_and`` / ``logical_or`` (elementwise, recorded when they hold data), which Triton
defines for ``int1`` only (it bitcasts any other type to ``int1``, which its compiler rejects
for wider types: so does kernbench). ``if`` on a result that holds data is refused as any
control flow on data is.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable

from kernbench.errors import KernelError
from kernbench.record.source import src_here
from kernbench.triton import arith
from kernbench.triton.value import VALUES, Pointer, Value, plain

_AND, _OR, _NOT = "_kb_and_", "_kb_or_", "_kb_not_"
_CODE: dict[types.CodeType, types.CodeType | None] = {}


def _thunk(node: ast.expr) -> ast.Lambda:
    args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                         kwarg=None, defaults=[])
    return ast.copy_location(ast.Lambda(args=args, body=node), node)


class _Rewrite(ast.NodeTransformer):
    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:  # noqa: N802 - ast's spelling
        self.generic_visit(node)
        name = _AND if isinstance(node.op, ast.And) else _OR
        call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()),
                        args=[_thunk(v) for v in node.values], keywords=[])
        return ast.copy_location(call, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:  # noqa: N802
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        call = ast.Call(func=ast.Name(id=_NOT, ctx=ast.Load()), args=[node.operand], keywords=[])
        return ast.copy_location(call, node)


def _find(code: types.CodeType, name: str) -> types.CodeType | None:
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            if c.co_name == name:
                return c
            got = _find(c, name)
            if got is not None:
                return got
    return None


def _rewritten(fn: types.FunctionType) -> types.CodeType | None:
    """``fn``'s code with and/or/not rewritten, or None (nothing to rewrite, no source)."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != fn.__name__ or not any(
            isinstance(n, ast.BoolOp) or isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
            for n in ast.walk(fdef)):
        return None
    fdef.decorator_list = []
    fdef.returns = None
    for a in (*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs):
        a.annotation = None  # never evaluated: the def statement is not executed
    fdef = _Rewrite().visit(fdef)
    body: list[ast.stmt] = [fdef]
    if fn.__code__.co_freevars:  # an enclosing scope, so the free variables stay free
        cells = [ast.Assign(targets=[ast.Name(id=v, ctx=ast.Store())],
                            value=ast.Constant(None)) for v in fn.__code__.co_freevars]
        outer = ast.parse("def _kb_outer_():\n    pass").body[0]
        assert isinstance(outer, ast.FunctionDef)
        outer.body = [*cells, fdef]
        body = [outer]
    mod = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(mod)
    ast.increment_lineno(mod, first - 1)
    code = _find(compile(mod, fn.__code__.co_filename, "exec", dont_inherit=True), fn.__name__)
    if code is None or set(code.co_freevars) != set(fn.__code__.co_freevars):
        return None
    return code


def code_of(fn: types.FunctionType) -> tuple[types.CodeType, tuple[str, ...]]:
    """The code to run for ``fn`` and the order of its free variables."""
    if fn.__code__ not in _CODE:
        _CODE[fn.__code__] = _rewritten(fn)
    code = _CODE[fn.__code__] or fn.__code__
    return code, code.co_freevars


def _logical(method: str, lhs: Value, rhs: Value, src: str) -> Value:
    for x in (lhs, rhs):
        if isinstance(x, Pointer):
            raise KernelError(f"Python '{method}' on a pointer is not supported by kernbench",
                              src)
        if not x.dtype.is_bool():
            raise KernelError(f"Python '{method}' on a tl.{x.dtype.name} value: Triton's "
                              f"compiler rejects it (logical_{method} bitcasts its operands "
                              f"to int1, which a {x.dtype.bits}-bit type cannot be); compare "
                              "explicitly (x != 0) or use & / |", src)
    return arith.binary("and_" if method == "and" else "or_", lhs, rhs)


def _bool_op(method: str, thunks: tuple[Callable[[], object], ...]) -> object:
    src = src_here()
    nontrivial: list[Value] = []
    value: object = None
    for th in thunks:
        value = th()
        if not isinstance(value, VALUES):  # a Python value (constexpr): short-circuits
            b = bool(plain(value))
            if (method == "and" and not b) or (method == "or" and b):
                return value
        else:
            nontrivial.append(value)
    if not nontrivial:
        return value
    while len(nontrivial) >= 2:
        rhs, lhs = nontrivial.pop(), nontrivial.pop()
        nontrivial.append(_logical(method, lhs, rhs, src))
    return nontrivial[0]


def bool_and(*thunks: Callable[[], object]) -> object:
    return _bool_op("and", thunks)


def bool_or(*thunks: Callable[[], object]) -> object:
    return _bool_op("or", thunks)


def bool_not(x: object) -> object:
    if not isinstance(x, VALUES):
        return not plain(x)
    if isinstance(x, Pointer):
        raise KernelError("Python 'not' on a pointer is not supported by kernbench", src_here())
    if not x.dtype.is_bool():
        raise KernelError(f"Python 'not' on a tl.{x.dtype.name} value: Triton's compiler "
                          "rejects it (not_ bitcasts its operand to int1, which a "
                          f"{x.dtype.bits}-bit type cannot be); write x == 0", src_here())
    return arith.invert(x)


HELPERS = {_AND: bool_and, _OR: bool_or, _NOT: bool_not}
