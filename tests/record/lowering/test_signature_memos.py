"""The front end remembers answers by signature: an elementwise op's result dtype (op and
operand dtypes, a Python scalar's position and dtype), a reduction's output (op, shape,
dtype, axis, keepdims) and two shapes' broadcast. Every recorded answer must be what
``schemas.rules`` gives, on the first call and from the memo, and a refused signature must
stay refused each time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import DtypeError, ShapeError
from kernbench.record.lowering import semantics
from kernbench.record.memo import BoundedMemo
from kernbench.replay import replay
from kernbench.schemas import rules
from kernbench.schemas.ops import OPS, Family
from kernbench.schemas.policy import scalar_dtype
from tests.conftest import rows

_BINARY = [op for op, s in OPS.items() if s.family is Family.BINARY]
_UNARY = [op for op, s in OPS.items() if s.family is Family.UNARY]
_DTYPES = ["float32", "float16", "int32", "int8", "bool"]
_SCALARS = [2, 2.5, True, -(2**40)]
_SHL = next(op for op in _BINARY if op.value == "shl")
_ADD = next(op for op in _BINARY if op.value == "add")


def _expected(op, args) -> str | None:
    named = tuple((scalar_dtype(a), True) if not isinstance(a, str) else (a, False)
                  for a in args)
    try:
        return rules.result_dtype(op, named).name
    except ValueError:
        return None


@kb.kernel
def every_signature(x, *, rounds: int):
    for _ in range(rounds):  # the second round is answered from the memo
        for op in _BINARY:
            for a, b in itertools.product(_DTYPES, repeat=2):
                try:
                    semantics.binary(op, tl.zeros((4,), a), tl.zeros((4,), b))
                except DtypeError:
                    pass
            for a, v in itertools.product(_DTYPES, _SCALARS):
                for args in ((tl.zeros((4,), a), v), (v, tl.zeros((4,), a))):
                    try:
                        semantics.binary(op, *args)
                    except DtypeError:
                        pass
        for op in _UNARY:
            for a in _DTYPES:
                try:
                    semantics.unary(op, tl.zeros((4,), a))
                except DtypeError:
                    pass


def _calls():
    """The (op, args) of every_signature's calls in order, args as dtype names or scalars."""
    for op in _BINARY:
        yield from ((op, (a, b)) for a, b in itertools.product(_DTYPES, repeat=2))
        for a, v in itertools.product(_DTYPES, _SCALARS):
            yield op, (a, v)
            yield op, (v, a)
    for op in _UNARY:
        yield from ((op, (a,)) for a in _DTYPES)


@pytest.mark.parametrize("cold", [True, False])
def test_every_recorded_result_dtype_is_the_rules_answer_first_time_and_from_the_memo(
        rec, monkeypatch, cold):
    if cold:
        monkeypatch.setattr(semantics, "_RESULT", {})
    trace = rec(every_signature, {"x": kb.tensor((4,), "float32")}, params={"rounds": 2})
    expected = [(op.value, dt) for op, args in _calls()
                if (dt := _expected(op, args)) is not None]
    got = [(r["name"], r["output"]["dtype"]) for r in rows(trace) if r["name"] != "fill"]
    assert len(expected) > 100
    assert got == expected * 2


def test_a_refused_signature_is_refused_again_after_an_accepted_one_was_remembered(rec):
    @kb.kernel
    def kernel(x):
        semantics.binary(_SHL, tl.zeros((4,), "int32"), tl.zeros((4,), "int32"))
        for _ in range(2):
            with pytest.raises(DtypeError):
                semantics.binary(_SHL, tl.zeros((4,), "float32"), tl.zeros((4,), "int32"))

    rec(kernel, {"x": kb.tensor((4,), "float32")})


_REDUCTIONS = [op for op, s in OPS.items() if s.family is Family.REDUCE]
_SHAPES = [(4, 8), (1, 8), (4, 1), (8,), (1,), (2, 4, 8)]


@kb.kernel
def reductions_and_broadcasts(x, *, rounds: int):
    for _ in range(rounds):
        for op, dt, shape in itertools.product(_REDUCTIONS, ["float32", "int32"], _SHAPES):
            for axis in [None, *range(-len(shape), len(shape))]:
                for keepdims in (False, True):
                    semantics.reduce(op, tl.zeros(shape, dt), axis, keepdims)
        for a, b in itertools.product(_SHAPES, repeat=2):
            try:
                semantics.binary(_ADD, tl.zeros(a, "float32"), tl.zeros(b, "float32"))
            except ShapeError:
                pass


def _reduction_rows():
    for op, dt, shape in itertools.product(_REDUCTIONS, ["float32", "int32"], _SHAPES):
        for axis in [None, *range(-len(shape), len(shape))]:
            for keepdims in (False, True):
                ax = None if axis is None else rules.axis_of(shape, axis)
                out, odt = rules.infer(op, [shape], [getattr(tl, dt)],
                                       {"axis": ax, "keepdims": keepdims})
                attrs = f'{{"axis":{"null" if ax is None else ax},"keepdims":' \
                        f'{"true" if keepdims else "false"}}}'
                yield op.value, list(out), odt.name, attrs, int(np.prod(out))


def _broadcast_rows():
    for a, b in itertools.product(_SHAPES, repeat=2):
        try:
            yield "add", list(rules.broadcast_shapes(a, b))
        except ValueError:
            pass


@pytest.mark.parametrize("cold", [True, False])
def test_reductions_and_broadcasts_are_the_rules_answers_first_time_and_from_the_memo(
        rec, monkeypatch, cold):
    if cold:
        monkeypatch.setattr(semantics, "_REDUCED", BoundedMemo())
        monkeypatch.setattr(semantics, "_BROADCAST", BoundedMemo())
    trace = rec(reductions_and_broadcasts, {"x": kb.tensor((4,), "float32")},
                params={"rounds": 2})
    got = [r for r in rows(trace) if r["name"] != "fill"]
    reduced = [(r["name"], r["output"]["shape"], r["output"]["dtype"], r["attrs"],
                r["num_elements"]) for r in got if r["name"] != "add"]
    added = [(r["name"], r["output"]["shape"]) for r in got if r["name"] == "add"]
    assert reduced == list(_reduction_rows()) * 2
    assert added == list(_broadcast_rows()) * 2



def test_minus_zero_after_zero_is_recorded_as_minus_zero_and_replays_to_numpy(rec, tmp_path):
    """0.0 == -0.0 in Python: a memo keyed by the scalar's value alone recorded the second
    as the first, and 1 / (x * -0.0) replayed as +inf."""
    @kb.kernel
    def kernel(x, y, z):
        a = tl.load(x, (4,), tl.float32)
        tl.store(y, 1.0 / (a * 0.0))
        tl.store(z, 1.0 / (a * -0.0))

    x = kb.data(np.arange(1, 5, dtype=np.float32))
    trace = rec(kernel, {"x": kb.tensor((4,), "float32", init=x),
                         "y": kb.tensor((4,), "float32", role="output"),
                         "z": kb.tensor((4,), "float32", role="output")})
    scalars = [r["attrs"] for r in rows(trace, "mul")]
    assert scalars[0] != scalars[1] and "-0.0" in scalars[1]
    res = replay(trace.path, in_process=True)
    assert res.status == "unverified"  # no reference: the outputs are compared here
    np.testing.assert_array_equal(res.outputs["y"], np.full(4, np.inf, np.float32))
    np.testing.assert_array_equal(res.outputs["z"], np.full(4, -np.inf, np.float32))


def test_a_masked_access_plan_is_not_reused_on_hardware_with_another_burst(tmp_path):
    """A masked strided store's bursts (``dma_burst_bytes``) come from its own recording's
    hardware: recording the same case on another burst size first, in the same process,
    must not change them (the masked-plan memo keyed by itemsize and burst)."""
    import dataclasses

    import kernbench as kb
    from kernbench.record.lowering import addressing, indexplan

    def case() -> kb.Case:
        return kb.build_case("serving-decode", {"batch": 2, "S_max": 40, "H_q": 8, "H_kv": 1,
                                                "D": 16, "page": 16, "splits": 2})

    v1 = kb.load_hw("ahbm-v1")

    def forget() -> None:
        for memo in (indexplan.MASKED, addressing._PLANS):
            memo.clear()

    forget()
    alone = kb.record(case(), tmp_path / "alone.ktrace", hw=v1)
    forget()
    kb.record(case(), tmp_path / "other.ktrace", hw=dataclasses.replace(v1, dma_burst_bytes=32))
    again = kb.record(case(), tmp_path / "again.ktrace", hw=v1)
    assert (again.path / "ops.parquet").read_bytes() == (alone.path / "ops.parquet").read_bytes()
