"""The validator's rule for ``guard`` rows (ADR-0840): one TCM element, a value of its dtype.

A guard decides on one element in TCM: its single input is a ``tcm`` operand of one
element, and its ``bits`` fit that operand's dtype (``schemas.guards.fits``). A row that
breaks either is a ``schema`` finding, as any other malformed row (the attrs table checks
the key itself, ``trace/attrs.py``).
"""

from __future__ import annotations

import json

import numpy as np

from kernbench.schemas.guards import BITS, fits
from kernbench.schemas.ops import GUARDED
from kernbench.trace.findings import Findings
from kernbench.trace.opbatch import OpBatch, fmt

_NAMES = frozenset(op.value for op in GUARDED)


def _problem(attrs_text: str | None, space: str | None, dtype: str | None,
             n: int | None) -> str | None:
    """What is wrong with one guard row (None: nothing this rule checks)."""
    if space != "tcm" or n != 1:
        return f"decides on {space}@{n} elements; a guard decides on one TCM element"
    try:
        bits = json.loads(attrs_text or "").get(BITS)
    except (ValueError, AttributeError, RecursionError):
        return None  # the attrs rules report unreadable attrs
    if bits is not None and dtype is not None and not fits(bits, dtype):
        return f"attrs bits {bits!r} is not a {dtype} value"
    return None


def guard_findings(b: OpBatch, found: Findings) -> None:
    """Check every guard row of one op-log batch."""
    rows = np.flatnonzero(b.strs("name").isin(_NAMES))
    if not len(rows):
        return
    rows, at = b.first_input(rows)
    el = b.elements.take(at)
    attrs = b.strs("attrs")
    probs = [_problem(attrs.get(int(r)), el.space.get(i), el.dtype.get(i),
                      None if el.shape.get(i) is None else int(el.shape.product[i]))
             for i, r in enumerate(rows.tolist())]
    bad = [k for k, p in enumerate(probs) if p is not None]
    found.add("schema", b.base + rows[bad], lambda k: fmt(
        "op {} (guard): {}", b.op(rows[bad[k]]), probs[bad[k]]))
