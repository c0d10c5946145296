"""One semantics object per op family: shape/dtype inference and evaluation, defined once.

``OPS[op].sem`` is the op's object (None for the families whose output is not a function of
its inputs: memory, dot, ipcq, scope, composite, fill, arange, const, gather, scatter,
atomics). Every room asks it: the recorder (native ``tl`` and the Triton front end's
lowering), the front end's concrete index arithmetic, replay's executors and the validator
(``schemas/rules.py``). The arithmetic that differs between the trace format and Triton's
language (promotion, integer division by zero, 0-d reductions, accumulator types, the store
conversion) is a ``Policy`` passed in (``schemas/policy.py``), never a second rule set.

- ``infer(shapes, dtypes, attrs, policy)``: the output ``(shape, dtype name)`` from the
  shapes and dtype names of the tensor operands (Python scalars are ``attrs["scalars"]``,
  ``[(position, value), ...]``, as in the trace); ValueError when the inputs do not fit.
- ``evaluator(attrs, policy)``: the compute function of the argument values (numpy arrays,
  scalars in their positions), before the store conversion; replay binds it once per op.
- ``evaluate(arrays, attrs, policy)``: the result array, converted to the inferred dtype by
  the policy's store (replay's engine performs that conversion when it writes).

``schemas/oracles.py`` stays an independent oracle: tests check these objects against it.
See docs/adr/0550-one-semantics-per-op-family.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from kernbench.schemas.philox import Philox
from kernbench.schemas.policy import (
    Policy,
    PromotionError,
    axis_of,
    kind_of,
    np_dtype,
    scalar_dtype,
)

Shape = tuple[int, ...]
Fn = Callable[..., Any]

__all__ = ["Arg", "Broadcast", "Cast", "Copy", "Elementwise", "Philox", "Reduce", "Scan",
           "Semantics", "Softmax", "broadcast_shapes", "broadcast_to", "result_rule"]


def broadcast_shapes(a: Shape, b: Shape) -> Shape:
    """numpy broadcasting of two shapes, or a ValueError naming both."""
    if a == b:
        return a
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(f"shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


def broadcast_to(shape: Shape, new_shape: Shape) -> Shape:
    """``new_shape`` if ``shape`` expands to it (every axis equal or from 1), else ValueError."""
    ok = len(new_shape) >= len(shape) and all(
        a == b or a == 1 for a, b in zip(shape[::-1], new_shape[::-1], strict=False))
    if not ok:
        raise ValueError(f"cannot broadcast {list(shape)} to {list(new_shape)}")
    return new_shape


# -- result dtype rules (the op table's ``Dt`` column, by value) -------------------------------
def _float(dt: str, policy: Policy) -> str:
    return dt if kind_of(dt) == "f" else "float32"


RULES: dict[str, Callable[[str, Policy], str]] = {
    "same": lambda dt, policy: dt,
    "float": _float,
    "bool": lambda dt, policy: policy.bool_name,
    "int32": lambda dt, policy: "int32",
    "float32": lambda dt, policy: "float32",
    "uint32": lambda dt, policy: "uint32",
}


def result_rule(name: str, rule: str, ints: bool) -> Callable[[str, Policy], str]:
    """The op's output dtype from its (promoted) operand dtype; ``ints``: a float operand is a
    ValueError naming the op."""
    fn = RULES[rule]
    if not ints:
        return fn

    def checked(dt: str, policy: Policy) -> str:
        if kind_of(dt) == "f":
            raise PromotionError(f"{name} needs integer or bool operands, got {dt}")
        return fn(dt, policy)

    return checked


def _shape0(shapes: Sequence[Shape], name: str) -> Shape:
    if len(shapes) != 1:
        raise ValueError(f"{name} takes one tensor operand, got {len(shapes)}")
    return tuple(shapes[0])


def _store(r: Any, dt: str, shape: Shape, policy: Policy) -> np.ndarray:
    return policy.store(np.asarray(r), np_dtype(dt)).reshape(shape)


@dataclass(frozen=True, slots=True)
class Elementwise:
    """``fn`` over the arguments (tensors or Python scalars at any position), numpy
    broadcasting. ``arity`` argument positions; ``where``: position 0 is a bool condition
    outside the promotion; ``divides``: ``/``, ``//`` or ``%`` (Triton promotes those apart,
    and an integer zero divisor is the policy's)."""

    name: str
    fn: Fn
    rule: Callable[[str, Policy], str]
    arity: int
    divides: bool = False
    where: bool = False

    def dtypes(self, operands: Sequence[tuple[str, bool]], policy: Policy) -> tuple[str, str]:
        """``(computation, result)`` dtype names from the argument dtypes, each
        ``(name, is a Python scalar)`` in position order (a where's condition included)."""
        if self.where:
            operands = operands[1:]
            if not policy.where_scalars:
                operands = [o for o in operands if not o[1]]
                if not operands:
                    return "float32", "float32"
        t = policy.operands(operands, self.divides)
        out = self.rule(t, policy)
        if policy.float_computation and kind_of(out) == "f" and kind_of(t) != "f":
            t = out
        return t, out

    def _operands(self, dtypes: Sequence[str], attrs: Mapping[str, Any]) -> list[tuple[str, bool]]:
        scalars = {int(p): v for p, v in attrs.get("scalars") or ()}
        if len(dtypes) + len(scalars) != self.arity:
            raise ValueError(f"{self.name} needs {self.arity} arguments, has {len(dtypes)} "
                             f"tensors and {len(scalars)} scalars")
        names = iter(dtypes)
        return [(scalar_dtype(scalars[k]), True) if k in scalars else (next(names), False)
                for k in range(self.arity)]

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        if not shapes:
            raise ValueError(f"{self.name} needs at least one tensor operand")
        shape = tuple(shapes[0])
        for s in shapes[1:]:
            shape = broadcast_shapes(shape, tuple(s))
        return shape, self.dtypes(self._operands(dtypes, attrs), policy)[1]

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        if self.divides and policy.zero_division_raises and self.rule is not RULES["float"]:
            return partial(_checked_division, self.fn, policy, self.name)
        return self.fn

    def evaluate(self, arrays: Sequence[Any], attrs: Mapping[str, Any], policy: Policy
                 ) -> np.ndarray:
        """``fn`` of the arguments (arrays, or Python scalars at the positions ``attrs``
        names), each read in the computation dtype, stored in the result dtype."""
        scalar_at = {int(p) for p, _ in attrs.get("scalars") or ()}
        ops = [(scalar_dtype(v), True) if k in scalar_at else (_name(v), False)
               for k, v in enumerate(arrays)]
        t, out = self.dtypes(ops, policy)
        args = [policy.load(v, t) for v in arrays]
        if self.where:
            args[0] = np.asarray(arrays[0]).astype(bool)
        with np.errstate(all="ignore"):
            r = self.evaluator(attrs, policy)(*args)
        shape = np.broadcast_shapes(*(np.shape(a) for k, a in enumerate(arrays)
                                      if k not in scalar_at))
        return _store(r, out, shape, policy)


def _checked_division(fn: Fn, policy: Policy, name: str, a: Any, b: Any) -> Any:
    policy.check_divisor(b, "modulo" if name == "mod" else "division")
    return fn(a, b)


def _name(v: Any) -> str:
    dt = v.dtype if isinstance(v, np.ndarray) else np.asarray(v).dtype
    name = _NAMES.get(dt)
    if name is None:  # ``dtype.name`` is slow: each dtype's name is looked up once
        name = _NAMES[dt] = ("bfloat16" if dt.kind == "V" else
                             "bool" if dt.kind == "b" else dt.name)
    return name


_NAMES: dict[np.dtype, str] = {}


@dataclass(frozen=True, slots=True)
class Cast:
    """``x.to(attrs["dtype"])``: same shape; the policy's store conversion, or with
    ``attrs["bitcast"]`` the same bits read as the new dtype (equal widths, checked when
    recorded)."""

    name: str

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        return _shape0(shapes, self.name), str(attrs["dtype"])

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        if attrs.get("bitcast"):
            return partial(_bitcast, np_dtype(str(attrs["dtype"])))
        return partial(_cast, policy.store, np_dtype(str(attrs["dtype"])))

    def evaluate(self, arrays: Sequence[Any], attrs: Mapping[str, Any], policy: Policy
                 ) -> np.ndarray:
        return self.evaluator(attrs, policy)(np.asarray(arrays[0]))


def _cast(store: Callable[[np.ndarray, np.dtype], np.ndarray], dt: np.dtype, v: Any
          ) -> np.ndarray:
    return store(np.asarray(v), dt)


def _bitcast(dt: np.dtype, v: Any) -> np.ndarray:
    """The bits of ``v`` as ``dt`` (a ValueError when the widths differ)."""
    v = np.ascontiguousarray(v)
    if v.dtype.itemsize != dt.itemsize:
        raise ValueError(f"bitcast of {v.dtype} to {dt} changes the bit width")
    return v.view(dt)


@dataclass(frozen=True, slots=True)
class _Accumulating:
    """A family whose input is read in an accumulator dtype first (reductions and scans):
    ``infer`` and ``evaluator`` are the family's, the reading and storing are shared."""

    name: str
    fn: Fn
    rule: Callable[[str, Policy], str]

    def accumulator(self, dt: str, attrs: Mapping[str, Any], policy: Policy) -> str:
        """The dtype the input is read in: ``attrs["dtype"]`` (Triton's ``dtype=``) or the
        policy's widening of ``dt``."""
        return str(attrs.get("dtype") or policy.accumulator(self.name, dt))

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        raise NotImplementedError

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        raise NotImplementedError

    def evaluate(self, arrays: Sequence[Any], attrs: Mapping[str, Any], policy: Policy
                 ) -> np.ndarray:
        x = np.asarray(arrays[0])
        shape, dt = self.infer([x.shape], [_name(x)], attrs, policy)
        x = policy.load(x, self.accumulator(_name(x), attrs, policy))
        with np.errstate(all="ignore"):
            return _store(self.evaluator(attrs, policy)(x), dt, shape, policy)


@dataclass(frozen=True, slots=True)
class Reduce(_Accumulating):
    """``ufunc.reduce`` over ``attrs["axis"]`` (None: every axis), ``keepdims``; the input
    read in the accumulator dtype first (``attrs["dtype"]`` or the policy's widening)."""

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        axis = attrs.get("axis")
        shape = policy.reduce_shape(_shape0(shapes, self.name),
                                    None if axis is None else int(axis),
                                    bool(attrs.get("keepdims", False)))
        return shape, self.rule(self.accumulator(dtypes[0], attrs, policy), policy)

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        axis = attrs.get("axis")
        return partial(_reduce, self.fn, None if axis is None else int(axis))


def _reduce(fn: Any, axis: int | None, x: np.ndarray) -> np.ndarray:
    return np.asarray(fn.reduce(x, axis=axis, keepdims=True))


@dataclass(frozen=True, slots=True)
class Arg(Reduce):
    """The index (int32) of the extreme along ``axis`` (None: of the flattened tile), the
    first on ties, as Triton."""

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        axis = attrs.get("axis")
        return partial(_arg, self.fn, None if axis is None else int(axis))


def _arg(fn: Fn, axis: int | None, x: np.ndarray) -> np.ndarray:
    return np.asarray(fn(x, axis=axis))


@dataclass(frozen=True, slots=True)
class Scan(_Accumulating):
    """Inclusive ``ufunc.accumulate`` along ``attrs["axis"]`` (``reverse``: from the end),
    same shape; the input widened to the policy's accumulator first."""

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        shape = _shape0(shapes, self.name)
        axis_of(shape, int(attrs.get("axis", 0)))
        return shape, self.rule(self.accumulator(dtypes[0], attrs, policy), policy)

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        return partial(_scan, self.fn, int(attrs.get("axis", 0)), bool(attrs.get("reverse")))


def _scan(ufunc: Any, axis: int, reverse: bool, x: np.ndarray) -> np.ndarray:
    if reverse:
        return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
    return ufunc.accumulate(x, axis=axis)


@dataclass(frozen=True, slots=True)
class Softmax:
    """Numerically stable softmax over ``attrs["axis"]`` (default -1), in float32."""

    name: str
    rule: Callable[[str, Policy], str]

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        shape = _shape0(shapes, self.name)
        axis_of(shape, int(attrs.get("axis", -1)))
        return shape, self.rule(dtypes[0], policy)

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        return partial(_softmax, int(attrs.get("axis", -1)))

    def evaluate(self, arrays: Sequence[Any], attrs: Mapping[str, Any], policy: Policy
                 ) -> np.ndarray:
        x = np.asarray(arrays[0])
        shape, dt = self.infer([x.shape], [_name(x)], attrs, policy)
        r = self.evaluator(attrs, policy)(x.astype(np.float32))
        return _store(r, dt, shape, policy)


def _softmax(axis: int, x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


@dataclass(frozen=True, slots=True)
class Broadcast:
    """``np.broadcast_to(x, attrs["shape"])``, materialised."""

    name: str

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        new = tuple(int(s) for s in attrs["shape"])
        return broadcast_to(_shape0(shapes, self.name), new), dtypes[0]

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        return partial(_broadcast, tuple(int(s) for s in attrs["shape"]))

    def evaluate(self, arrays: Sequence[Any], attrs: Mapping[str, Any], policy: Policy
                 ) -> np.ndarray:
        x = np.asarray(arrays[0])
        self.infer([x.shape], [_name(x)], attrs, policy)
        return np.array(self.evaluator(attrs, policy)(x))


def _broadcast(shape: Shape, x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(x, shape)


@dataclass(frozen=True, slots=True)
class Copy:
    """The value itself (``tl.copy_to``): same shape and dtype."""

    name: str

    def infer(self, shapes: Sequence[Shape], dtypes: Sequence[str], attrs: Mapping[str, Any],
              policy: Policy) -> tuple[Shape, str]:
        return _shape0(shapes, self.name), dtypes[0]

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Fn:
        return np.asarray

    def evaluate(self, arrays: Sequence[Any], attrs: Mapping[str, Any], policy: Policy
                 ) -> np.ndarray:
        return np.array(arrays[0])


Semantics = Elementwise | Cast | Reduce | Scan | Softmax | Broadcast | Copy | Philox
