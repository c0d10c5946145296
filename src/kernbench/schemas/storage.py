"""Values held in their trace storage (bfloat16 as uint16 bits): the conversions every
evaluation of an op's semantics shares — replay's engine and Phase 1's guard evaluator
(``record/guards``) — so both compute the same bits.

A result is stored by ``as_dtype`` (the policy's store conversion of the trace format,
bfloat16 rounded to nearest even without ``ml_dtypes``); a low-precision float operand is
read as float32 by ``to_f32`` (bfloat16 by a 16-bit shift: exact).
"""

from __future__ import annotations

import numpy as np

from kernbench.schemas import bf16

F32 = np.dtype(np.float32)
#: the storage of a bfloat16 value
BF16 = bf16.STORAGE
#: float storages computed in float32 (their values read by ``to_f32``)
LOW_FLOATS = frozenset({BF16, np.dtype(np.float16)})

__all__ = ["BF16", "F32", "LOW_FLOATS", "as_dtype", "compute_value", "to_f32"]


def to_f32(v: np.ndarray) -> np.ndarray:
    """``v`` as a new float32 array (bfloat16 by shifting, others by numpy's cast)."""
    return bf16.to_f32(v) if v.dtype == BF16 else v.astype(F32)


def as_dtype(v: np.ndarray, npd: np.dtype) -> np.ndarray:
    """``v`` as a new array of the storage dtype ``npd`` (``v.astype(npd)``, where a uint16
    side is bf16: converted as ``ml_dtypes`` converts)."""
    if npd is BF16 or npd == BF16:  # float32 (most often) rounds without a dtype dispatch
        return bf16.f32_to_bf16(v) if v.dtype == F32 else bf16.to_bf16(v)
    if v.dtype == BF16:
        return bf16.from_bf16(v, npd)
    return v.astype(npd)


def compute_value(v: np.ndarray) -> np.ndarray:
    """A stored operand as an op computes with it: low-precision floats as float32."""
    return to_f32(v) if v.dtype in LOW_FLOATS else v
