"""A guard's value (ADR-0840): the exact bits of the one element a kernel decided on.

A ``guard`` row's operand is the TCM element (a scalar, or a one-element block) whose value
chose the kernel's path; its attrs hold that value's bits, ``{"bits": N}`` with ``N`` the
element's storage read as an unsigned little-endian integer (bfloat16: its 16 bits). Phase 1
writes them (``encode``), Phase 2 compares them bitwise with what it computes
(``diverges``), the validator checks they fit the operand's dtype (``fits``) and ``diff``
and the messages show them as values (``show``). No other module interprets the bits.
See docs/adr/0840-guarded-paths.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernbench.schemas import bf16
from kernbench.schemas.dtypes import by_name

#: the attrs key of a guard's value
BITS = "bits"


def _storage(dtype: str) -> np.dtype:
    return np.dtype(by_name(dtype).storage)


def encode(value: np.ndarray) -> int:
    """The bits of the one element of ``value`` (storage dtype: bf16 as uint16)."""
    v = np.ascontiguousarray(value).reshape(-1)
    if v.size != 1:
        raise ValueError(f"a guard decides on one element, not {v.size}")
    raw = v.view(np.uint8).tobytes()
    return int.from_bytes(raw, "little", signed=False)


def fits(bits: Any, dtype: str) -> bool:
    """Whether ``bits`` is a value of ``dtype`` (an unsigned integer of its width; a bool
    is 0 or 1)."""
    if not isinstance(bits, int) or isinstance(bits, bool) or bits < 0:
        return False
    if dtype == "bool":
        return bits in (0, 1)
    try:
        width = _storage(dtype).itemsize * 8
    except (KeyError, TypeError):
        return False
    return bits < 1 << width


def element(bits: int, dtype: str) -> np.ndarray:
    """The one-element storage array holding ``bits`` as ``dtype``."""
    st = _storage(dtype)
    return np.frombuffer(int(bits).to_bytes(st.itemsize, "little"), st).copy()


def value(bits: int, dtype: str) -> bool | int | float:
    """The Python value ``bits`` stands for in ``dtype`` (bfloat16 through float32)."""
    e = element(bits, dtype)
    if dtype == "bfloat16":
        return float(bf16.to_f32(e)[0])
    x = e[0]
    if e.dtype.kind == "b":
        return bool(x)
    return float(x) if e.dtype.kind == "f" else int(x)


def show(bits: int, dtype: str) -> str:
    """``bits`` as the value a reader recognises (``17``, ``True``, ``-0.0``, ``nan``)."""
    v = value(bits, dtype)
    if isinstance(v, float):
        if math.isnan(v):
            return f"nan (bits {bits:#x})"
        return repr(v)
    return repr(v)


def diverges(src: str, program: int, recorded: str, computed: str) -> str:
    """ADR-0840's message: the recorded path is not the one the data take."""
    return (f"the trace's path diverges from its data at {src} (program {program}): "
            f"recorded {recorded}, replay computes {computed}")
