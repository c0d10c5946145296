"""Phase 1 and Phase 2 agree on every op of the table, because both ask one semantics object.

Per family, over generated inputs (hypothesis): the shape and dtype Phase 1 infers
(``schemas/rules.infer``, what the recorder allocates; ``sem.infer`` under Triton's policy)
are the shape and dtype of the array Phase 2 evaluates (the replay executor's step, converted
as the engine writes it; ``sem.evaluate``), and the executor's values are ``evaluate``'s. The
Triton policy's edge cases (division by zero, int32 wrap, mixed promotion, 0-d reductions)
are checked against closed forms and the independent oracle (``schemas/oracles.py``).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.replay.convert import as_dtype
from kernbench.replay.executors import EXECUTORS, BindContext
from kernbench.replay.store import MemoryStore, Operand
from kernbench.schemas import oracles, rules
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import OPS, Family, Op
from kernbench.schemas.policy import KERNBENCH, TRITON, Policy, PromotionError, np_dtype
from kernbench.trace.hw import HwConfig

BF16 = np.dtype(ml_dtypes.bfloat16)
SEM_OPS = sorted((op for op, s in OPS.items() if s.sem is not None), key=str)
FAMILIES = sorted({OPS[op].family for op in SEM_OPS}, key=str)
KB_DTYPES = ["float32", "float16", "bfloat16", "int32", "int8", "bool"]
TRITON_DTYPES = [*KB_DTYPES[:5], "int1", "int16", "int64", "uint8", "uint32", "float64"]
#: ops whose numpy function takes bool operands
BOOL_OK = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.XOR, Op.NOT,
                     Op.MAXIMUM, Op.MINIMUM, Op.WHERE, Op.CAST, Op.COPY, Op.BROADCAST})
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


class Tcm:
    """Arrays placed one after another in PE 0's TCM (as replay places operands)."""

    def __init__(self) -> None:
        self.store = MemoryStore(HwConfig().to_dict(), [])
        self.cursor = 0

    def put(self, arr: np.ndarray) -> Operand:
        arr = np.ascontiguousarray(arr)
        self.store.fill("tcm", 0, self.cursor, arr.tobytes())
        o = self.store.operand("tcm", 0, self.cursor, arr.shape, _name(arr), False)
        self.cursor += -(-arr.nbytes // 16) * 16
        return o

    def slot(self, shape: tuple[int, ...], dtype: str) -> Operand:
        o = self.store.operand("tcm", 0, self.cursor, shape, dtype, False)
        self.cursor += -(-max(o.nbytes, 1) // 16) * 16
        return o


def _name(a: np.ndarray) -> str:
    return "bfloat16" if a.dtype == BF16 else ("bool" if a.dtype.kind == "b" else a.dtype.name)


def _values(draw: Any, shape: tuple[int, ...], dt: str, positive: bool = False) -> np.ndarray:
    n = int(np.prod(shape))
    lo = 0 if positive else -8
    ints = draw(st.lists(st.integers(lo, 8), min_size=n, max_size=n))
    return np.asarray(ints, np.float64).reshape(shape).astype(np_dtype(dt)) if dt not in (
        "bool", "int1") else (np.asarray(ints).reshape(shape) > 0)


@st.composite
def cases(draw: Any, op: Op, policy: Policy) -> tuple[list[Any], dict[str, Any]]:
    """Arguments (arrays, Python scalars in their positions) and attrs for ``op``."""
    s = OPS[op]
    names = KB_DTYPES if policy is KERNBENCH else TRITON_DTYPES
    if op not in BOOL_OK:
        names = [n for n in names if n not in ("bool", "int1")]
    if s.ints:
        names = [n for n in names if np_dtype(n).kind in "biu"]
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    dt = draw(st.sampled_from(names))
    attrs: dict[str, Any] = {}
    fam = s.family
    if fam is Family.PHILOX:
        return _philox(draw, shape)
    if fam in (Family.BINARY, Family.TERNARY, Family.WHERE):
        n = 3 if fam is not Family.BINARY else 2
        args: list[Any] = []
        for k in range(n):
            if fam is Family.WHERE and k == 0:
                args.append(_values(draw, shape, "bool"))
                continue
            sub = shape[draw(st.integers(0, len(shape) - 1)):]  # broadcasts against shape
            kdt = draw(st.sampled_from(names)) if fam is not Family.WHERE else dt
            args.append(_values(draw, sub, kdt, positive=op is Op.POW))
        if draw(st.booleans()):  # one Python scalar (never where's condition)
            pos = draw(st.integers(1 if fam is Family.WHERE else 0, n - 1))
            args[pos] = draw(st.sampled_from([2, 3, 1.5, -2.0] if not s.ints else [1, 2, 3]))
            attrs["scalars"] = [[pos, args[pos]]]
        if all(not isinstance(a, np.ndarray) or a is args[0] and fam is Family.WHERE
               for a in args) or not any(isinstance(a, np.ndarray) for a in args):
            args[-1] = _values(draw, shape, dt)
            attrs.pop("scalars", None)
        return args, attrs
    x = _values(draw, shape, dt, positive=op in (Op.LOG, Op.LOG2, Op.SQRT, Op.RSQRT))
    if fam in (Family.REDUCE, Family.ARG):
        attrs = {"axis": draw(st.sampled_from([None, *range(-len(shape), len(shape))])),
                 "keepdims": draw(st.booleans())}
    elif fam in (Family.SCAN, Family.SOFTMAX):
        attrs = {"axis": draw(st.integers(0, len(shape) - 1))}
        if fam is Family.SCAN and draw(st.booleans()):
            attrs["reverse"] = True
    elif fam is Family.CAST:
        attrs = {"dtype": draw(st.sampled_from(KB_DTYPES))}
    elif fam is Family.BROADCAST:
        attrs = {"shape": [draw(st.integers(1, 3)), *shape]}
    return [x], attrs


def _philox(draw: Any, shape: tuple[int, ...]) -> tuple[list[Any], dict[str, Any]]:
    """(seed, c0, c1, c2, c3) over their full ranges: blocks broadcasting against ``shape``
    (integer seeds of any width, 32-bit counters) or Python integers."""
    args: list[Any] = []
    scalars = []
    for k in range(5):
        names = ["int32", "int64", "uint32", "int8"] if k == 0 else ["int32", "uint32"]
        info = np.iinfo(np_dtype(draw(st.sampled_from(names))))
        if k and draw(st.booleans()):
            v = draw(st.integers(0, 2**32 - 1))
            args.append(v)
            scalars.append([k, v])
            continue
        sub = shape[draw(st.integers(0, len(shape))):]
        n = int(np.prod(sub))
        vals = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=n, max_size=n))
        args.append(np.asarray(vals, info.dtype).reshape(sub))
    if all(np.ndim(a) == 0 for a in args):  # one full block gives the output its shape
        args[1] = np.zeros(shape, np.uint32)
        scalars = [p for p in scalars if p[0] != 1]
    attrs: dict[str, Any] = {"n_rounds": draw(st.integers(0, 10)), "word": draw(
        st.integers(0, 3))}
    if scalars:
        attrs["scalars"] = scalars
    return args, attrs


def _tensors(args: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    at = {int(p) for p, _ in attrs.get("scalars") or ()}
    return [a for k, a in enumerate(args) if k not in at]


def _check(op: Op, policy: Policy, args: list[Any], attrs: dict[str, Any]) -> None:
    sem = OPS[op].sem
    assert sem is not None
    ts = _tensors(args, attrs)
    try:
        shape, dt = sem.infer([t.shape for t in ts], [_name(t) for t in ts], attrs, policy)
    except PromotionError:  # refused dtypes: evaluation refuses them as well
        with pytest.raises(PromotionError):
            sem.evaluate(args, attrs, policy)
        return
    try:
        got = sem.evaluate(args, attrs, policy)
    except ZeroDivisionError:  # the Triton policy's integer division by zero
        assert policy.zero_division_raises and op in (Op.FLOORDIV, Op.MOD)
        assert np.any(np.asarray(args[1]) == 0)
        return
    assert got.shape == shape, (op, attrs)
    assert got.dtype == np_dtype(dt), (op, attrs)
    if policy is KERNBENCH:
        _replay_agrees(op, ts, attrs, got)


def _replay_agrees(op: Op, ts: list[np.ndarray], attrs: dict[str, Any], want: np.ndarray
                   ) -> None:
    """Phase 1's inference allocates the output; Phase 2's executor fills it with the value
    ``evaluate`` gives (the executor validates the output operand against the inference)."""
    inferred = rules.infer(op, [t.shape for t in ts], [DTYPES[_name(t)] for t in ts], attrs)
    assert inferred is not None
    shape, dt = inferred
    m = Tcm()
    ins = [m.put(t) for t in ts]
    out = m.slot(shape, dt.name)
    with np.errstate(all="ignore"):
        res = EXECUTORS[op].bind(attrs, ins, out, BindContext(m.store, 0))()
        got = as_dtype(np.asarray(res), out.npd).reshape(shape)
    if dt.name == "bfloat16":
        got = got.view(BF16)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("policy", [KERNBENCH, TRITON], ids=lambda p: p.name)
@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_inferred_shape_and_dtype_are_the_evaluated_arrays(family: Family, policy: Policy
                                                           ) -> None:
    for op in (op for op in SEM_OPS if OPS[op].family is family):
        _agree(op, policy)


def _agree(op: Op, policy: Policy) -> None:
    @SETTINGS
    @given(cases(op, policy))
    def agree(case: tuple[list[Any], dict[str, Any]]) -> None:
        _check(op, policy, *case)

    agree()


def test_every_op_with_an_inferred_output_has_a_semantics_object() -> None:
    assert {op for op in OPS if OPS[op].sem is not None} == set(rules.INFERRED)
    assert all(OPS[op].sem is not None for op in SEM_OPS)


# -- the Triton policy's edge cases ---------------------------------------------------------
A = np.array([7, -7, 7, -7, 0], np.int32)
B = np.array([2, 2, -2, -2, 3], np.int32)


def test_integer_division_truncates_toward_zero_as_the_oracle() -> None:
    for policy in (KERNBENCH, TRITON):
        fd = OPS[Op.FLOORDIV].sem.evaluate([A, B], {}, policy)  # type: ignore[union-attr]
        md = OPS[Op.MOD].sem.evaluate([A, B], {}, policy)  # type: ignore[union-attr]
        np.testing.assert_array_equal(fd, [3, -3, -3, 3, 0])
        np.testing.assert_array_equal(fd, oracles.floordiv(A, B))
        np.testing.assert_array_equal(md, oracles.mod(A, B))
        np.testing.assert_array_equal(fd * B + md, A)


def test_integer_division_by_zero_raises_under_triton_and_is_zero_in_the_trace() -> None:
    zero = np.array([0, 1], np.int32)
    a = np.array([5, 5], np.int32)
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        OPS[Op.FLOORDIV].sem.evaluate([a, zero], {}, TRITON)  # type: ignore[union-attr]
    with pytest.raises(ZeroDivisionError, match="integer modulo by zero"):
        OPS[Op.MOD].sem.evaluate([a, zero], {}, TRITON)  # type: ignore[union-attr]
    got = OPS[Op.FLOORDIV].sem.evaluate([a, zero], {}, KERNBENCH)  # type: ignore[union-attr]
    np.testing.assert_array_equal(got, [0, 5])
    f = OPS[Op.MOD].sem.evaluate([np.float32([5.0]), np.float32([0.0])], {}, TRITON)  # type: ignore[union-attr]
    assert np.isnan(f[0])  # float % 0 is fmod's NaN under both policies


def test_int32_wraps_on_overflow() -> None:
    big = np.array([2**31 - 1], np.int32)
    for policy in (KERNBENCH, TRITON):
        got = OPS[Op.ADD].sem.evaluate([big, 1], {"scalars": [[1, 1]]}, policy)  # type: ignore[union-attr]
        assert got.dtype == np.int32 and got[0] == -2**31
        s = OPS[Op.SUM].sem.evaluate([np.repeat(big, 2)], {"axis": 0}, policy)  # type: ignore[union-attr]
        assert s.dtype == np.int32 and int(s.reshape(-1)[0]) == -2


@pytest.mark.parametrize(("policy", "a", "b", "scalar", "want"), [
    (KERNBENCH, "int8", "float16", None, "float16"),
    (KERNBENCH, "int32", None, 2.5, "float32"),
    (KERNBENCH, "bfloat16", "float16", None, "float32"),
    (TRITON, "float16", None, 2.0, "float16"),  # a weak float scalar keeps fp16
    (TRITON, "int8", None, 300, "int8"),  # a weak int scalar keeps int8
    (TRITON, "int32", None, 2.5, "float32"),
    (TRITON, "uint8", "int32", None, "int32"),
    (TRITON, "uint32", "int32", None, "uint32"),
    (TRITON, "bfloat16", "float16", None, "float32"),
], ids=lambda v: v.name if isinstance(v, Policy) else str(v))
def test_mixed_promotion(policy: Policy, a: str, b: str | None, scalar: float | None,
                         want: str) -> None:
    x = np.ones(3, np_dtype(a))
    y: Any = np.ones(3, np_dtype(b)) if b is not None else scalar
    attrs = {} if b is not None else {"scalars": [[1, scalar]]}
    sem = OPS[Op.ADD].sem
    assert sem is not None
    assert sem.infer([x.shape] + ([(3,)] if b else []), [a] + ([b] if b else []), attrs,
                     policy)[1] == want
    assert sem.evaluate([x, y], attrs, policy).dtype == np_dtype(want)


def test_triton_division_of_mixed_signedness_is_refused() -> None:
    sem = OPS[Op.FLOORDIV].sem
    assert sem is not None
    with pytest.raises(PromotionError, match="differ in signedness"):
        sem.infer([(2,), (2,)], ["uint32", "int32"], {}, TRITON)


@pytest.mark.parametrize("op", [Op.SUM, Op.MAX, Op.ARGMAX], ids=str)
def test_a_full_reduction_is_0d_under_triton_and_1_element_in_the_trace(op: Op) -> None:
    sem = OPS[op].sem
    assert sem is not None
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    attrs = {"axis": None, "keepdims": False}
    assert sem.infer([x.shape], ["int8"], attrs, TRITON)[0] == ()
    assert sem.infer([x.shape], ["int8"], attrs, KERNBENCH)[0] == (1,)
    t, k = sem.evaluate([x], attrs, TRITON), sem.evaluate([x], attrs, KERNBENCH)
    assert t.shape == () and k.shape == (1,) and t.reshape(1)[0] == k[0]
    assert t.dtype == np.int32  # Triton widens int8 (sum, max) and indexes in int32
    assert k.dtype == (np.int8 if op is not Op.ARGMAX else np.int32)
