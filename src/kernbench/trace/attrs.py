"""The validator's rules for ``attrs``: every field Phase 2 reads, per op family (ADR-0539).

``FIELDS[family]`` lists the attrs keys replay's executors of that family read, each with
its kind (``KINDS``: a type and range test); ``REQUIRED`` the keys an op cannot replay
without; ``INPUTS`` how many inputs an op's attrs imply, for the families whose inputs
depend on them (gather, scatter, atomics). A row whose attrs break these is a ``schema``
finding: every command but ``check`` refuses the trace (exit 2) before anything runs, where
replay would otherwise fail mid-run ("could not convert string to float", exit 1).
Attrs are JSON; nothing is evaluated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.schemas.arrow import BITCAST_ATTR, GUARD_MINOR
from kernbench.schemas.dtypes import DTYPES, V3_DTYPES
from kernbench.schemas.ops import GUARDED, OPS, Family, Op
from kernbench.trace.columns import unique_rows
from kernbench.trace.element_checks import indexed_rows
from kernbench.trace.opbatch import OpBatch, fmt

if TYPE_CHECKING:
    from kernbench.trace.findings import Findings

INPUT = "input"
INT32 = 1 << 31


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _scalar(v: Any) -> bool:
    """A Python scalar a kernel may store or compare (bool, int in int64, float)."""
    return isinstance(v, bool) or (_int(v) and -(1 << 63) <= v < 1 << 64) or (
        isinstance(v, float) and (math.isfinite(v) or math.isinf(v) or math.isnan(v)))


def _scalars(v: Any, positions: int = 3, test: Callable[[Any], bool] = _scalar) -> bool:
    return isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and _int(p[0]) and 0 <= p[0] < positions
        and test(p[1]) for p in v) and len({p[0] for p in v}) == len(v)


def _philox_scalars(v: Any) -> bool:
    """Integers at distinct positions of philox's five (seed, c0, c1, c2, c3)."""
    return _scalars(v, 5, lambda x: _int(x) and -(1 << 63) <= x < 1 << 64)


#: kind name -> (test, what it must be)
KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "scalar": (_scalar, "a number or bool"),
    "id": (lambda v: _int(v) and 0 <= v < 1 << 62, "an access.parquet id"),
    "id_or_input": (lambda v: v == INPUT or (_int(v) and 0 <= v < 1 << 62),
                    "an access.parquet id or \"input\""),
    "input": (lambda v: v == INPUT, "\"input\""),
    "scalar_or_input": (lambda v: v == INPUT or _scalar(v), "a number, bool or \"input\""),
    "ints": (lambda v: isinstance(v, list) and len(v) <= 8 and all(map(_int, v)),
             "a list of at most 8 integers"),
    "int": (_int, "an integer"),
    "int32": (lambda v: _int(v) and -INT32 <= v < INT32, "an int32"),
    "axis": (lambda v: v is None or (_int(v) and -8 <= v < 8), "an axis or null"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "pair": (lambda v: isinstance(v, list) and len(v) == 2 and all(map(_int, v))
             and 0 <= v[0] < v[1], "[k0, k1] with 0 <= k0 < k1"),
    "scalars": (_scalars, "a list of [position, scalar]"),
    "philox_scalars": (_philox_scalars, "a list of [position 0-4, integer]"),
    "word": (lambda v: _int(v) and 0 <= v < 4, "0, 1, 2 or 3"),
    "rounds": (lambda v: _int(v) and 0 <= v <= 1 << 16, "a number of rounds (0 to 65536)"),
    "dtype": (lambda v: v in DTYPES, f"one of {sorted(DTYPES)}"),
    "offset": (lambda v: _int(v) and 0 <= v < 1 << 62, "a non-negative offset"),
    "bits": (lambda v: _int(v) and 0 <= v < 1 << 64, "an unsigned integer of at most 64 bits"),
}

_ELEMENTS = {"strides": "ints", "base": "int", "access": "id", "mask": "id"}
_ELEMENTWISE = {"scalars": "scalars"}
#: family -> {attrs key replay reads: its kind}
FIELDS: dict[Family, dict[str, str]] = {
    Family.MEMORY: {**_ELEMENTS, "other": "scalar"},
    Family.GATHER: {"mask": "id_or_input", "other": "scalar"},
    Family.SCATTER: {"mask": "id_or_input"},
    Family.ATOMIC: {**_ELEMENTS, "mask": "id_or_input", "offsets": "input", "value": "scalar",
                    "cmp": "scalar_or_input"},
    Family.CONST: {"values": "id"},
    Family.FILL: {"value": "scalar"},
    Family.ARANGE: {"start": "int32"},
    Family.REDUCE: {"axis": "axis", "keepdims": "bool"},
    Family.ARG: {"axis": "axis", "keepdims": "bool"},
    Family.SCAN: {"axis": "axis", "reverse": "bool"},
    Family.SOFTMAX: {"axis": "axis"},
    Family.DOT: {"a_cols": "pair"},
    Family.BROADCAST: {"shape": "ints"},
    Family.CAST: {"dtype": "dtype", "bitcast": "bool"},
    Family.BINARY: _ELEMENTWISE, Family.TERNARY: _ELEMENTWISE, Family.WHERE: _ELEMENTWISE,
    Family.UNARY: _ELEMENTWISE,
    Family.SCOPE: {"lo": "offset", "hi": "offset"},
    Family.PHILOX: {"scalars": "philox_scalars", "n_rounds": "rounds", "word": "word"},
    Family.GUARD: {"bits": "bits"},
}
#: family -> keys (or alternatives, ``a|b``) an op cannot replay without
REQUIRED: dict[Family, tuple[str, ...]] = {
    Family.ATOMIC: ("strides|access|offsets",), Family.CONST: ("values",),
    Family.FILL: ("value",), Family.PHILOX: ("n_rounds", "word"), Family.GUARD: ("bits",),
}
#: ops of a family that need more keys than the family
REQUIRED_BY_OP: dict[Op, tuple[str, ...]] = {Op.SCOPE_EXIT: ("lo", "hi"),
                                              Op.ATOMIC_CAS: ("cmp",)}


def _inputs_gather(a: dict) -> int:
    return 2 + (a.get("mask") == INPUT)


def _inputs_atomic(a: dict) -> int:
    return (1 + ("value" not in a) + (a.get("cmp") == INPUT) + (a.get("offsets") == INPUT)
            + (a.get("mask") == INPUT))


#: family -> the number of inputs an op's attrs imply
INPUTS: dict[Family, Callable[[dict], int]] = {
    Family.GATHER: _inputs_gather, Family.SCATTER: _inputs_gather,
    Family.ATOMIC: _inputs_atomic,
    Family.PHILOX: lambda a: 5 - len(a.get("scalars") or ()),
    Family.GUARD: lambda a: 1,
}
_FAMILY = {op.value: spec.family for op, spec in OPS.items()}


def problem(name: str, attrs_text: str, n_inputs: int) -> str | None:
    """What is wrong with one op's attrs (None: nothing this table checks)."""
    family = _FAMILY.get(name)
    if family is None:
        return None  # an unknown op name is its own finding
    try:
        attrs = json.loads(attrs_text)
    except (ValueError, RecursionError):
        return None  # unparseable attrs are their own finding
    if not isinstance(attrs, dict):
        return None
    for key, kind in FIELDS.get(family, {}).items():
        if key in attrs:
            test, what = KINDS[kind]
            if not test(attrs[key]):
                return f"attrs {key!r} is {_short(attrs[key])}, expected {what}"
    need = REQUIRED.get(family, ()) + REQUIRED_BY_OP.get(Op(name), ())
    for keys in need:
        if not any(k in attrs for k in keys.split("|")):
            return f"attrs lack {' or '.join(repr(k) for k in keys.split('|'))}"
    if family is Family.SCOPE and "lo" in attrs and "hi" in attrs and attrs["lo"] > attrs["hi"]:
        return f"attrs rewind [{attrs['lo']}, {attrs['hi']})"
    count = INPUTS.get(family)
    if count is not None and n_inputs != count(attrs):
        return f"its attrs imply {count(attrs)} inputs, it has {n_inputs}"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:40] + "..."


def attrs_findings(b: OpBatch, found: Findings) -> None:
    """Check the attrs of one op-log batch, once per distinct (name, attrs, input count)."""
    name, attrs = b.strs("name"), b.strs("attrs")
    _, n_in, _ = b.inputs
    rows = np.flatnonzero(~name.null & ~attrs.null)
    if not len(rows):
        return
    keys, which = unique_rows(np.column_stack([name.codes[rows], attrs.codes[rows],
                                               n_in[rows]]))
    probs = [problem(name.values[n], attrs.values[a], k) for n, a, k in keys.tolist()]
    bad = np.array([p is not None for p in probs])
    hit = rows[bad[which]]
    why = [probs[j] for j in which[bad[which]].tolist()]
    found.add("schema", b.base + hit, lambda k: fmt("op {} ({}): {}", b.op(hit[k]),
                                                    name.get(hit[k]), why[k]))


#: the op families a version-2 trace introduced (indexed memory)
V2_FAMILIES = frozenset({Family.GATHER, Family.SCATTER, Family.ATOMIC, Family.CONST})
_V2_NAMES = frozenset(op.value for op, spec in OPS.items() if spec.family in V2_FAMILIES)


_GUARD_NAMES = frozenset(op.value for op in GUARDED)


def version_findings(b: OpBatch, major: int, found: Findings, minor: int = 0) -> None:
    """A manifest version below the rows it holds: version-2 rows (indexed memory) in a
    version-1 trace, version-3 rows (a dtype of ``V3_DTYPES`` or a bitcast) below 3, a
    guard (a guarded path) in a trace of minor version 0."""
    name = b.strs("name")
    if minor < GUARD_MINOR:
        hit = np.flatnonzero(name.isin(_GUARD_NAMES))
        found.add("schema", b.base + hit, lambda k: fmt(
            "op {} ({}) is a guarded decision, a version-{}.{} row in a trace whose manifest "
            "says schema_version {}", b.op(hit[k]), name.get(hit[k]), major, GUARD_MINOR,
            major))
    if major < 3:
        o = b.operands
        uses = np.zeros(b.n, bool)
        uses[o.row[o.dtype.isin(V3_DTYPES)]] = True
        uses |= b.strs("attrs").map(lambda v: BITCAST_ATTR in v, False, bool)
        hit = np.flatnonzero(uses)
        found.add("schema", b.base + hit, lambda k: fmt(
            "op {} ({}) holds an int64/uint32/uint8/int16 operand or a bitcast, a version-3 row "
            "in a trace whose manifest says schema_version {}", b.op(hit[k]), name.get(hit[k]),
            major))
    if major >= 2:
        return
    hit = np.flatnonzero(name.isin(_V2_NAMES) | indexed_rows(b))
    found.add("schema", b.base + hit, lambda k: fmt(
        "op {} ({}) is indexed memory, a version-2 row in a trace whose manifest says "
        "schema_version {}", b.op(hit[k]), name.get(hit[k]), major))
