"""Dtype conversions on the replay hot path; bfloat16 is uint16 storage (``BF16``).

Replay never imports ``ml_dtypes``: a bf16 operand's view is uint16 bits (no other trace
dtype is uint16, so the dtype says it is bf16), read as float32 by a 16-bit shift and written
back rounded to nearest even, exactly as ``ml_dtypes`` casts (``kernbench.schemas.bf16``).
"""

from __future__ import annotations

import numpy as np

from kernbench.schemas import bf16
from kernbench.schemas.bf16 import to_f32 as bf16_to_f32

F32 = np.dtype(np.float32)
#: the storage of a bfloat16 operand in replay
BF16 = bf16.STORAGE

__all__ = ["BF16", "F32", "bf16_to_f32", "to_f32", "as_dtype"]


def to_f32(v: np.ndarray) -> np.ndarray:
    """``v`` as a new float32 array (bfloat16 by shifting, others by numpy's cast)."""
    return bf16_to_f32(v) if v.dtype == BF16 else v.astype(F32)


def as_dtype(v: np.ndarray, npd: np.dtype) -> np.ndarray:
    """``v`` as a new array of the storage dtype ``npd`` (``v.astype(npd)``, where a uint16
    side is bf16: converted as ``ml_dtypes`` converts)."""
    if npd is BF16 or npd == BF16:  # float32 (most often) rounds without a dtype dispatch
        return bf16.f32_to_bf16(v) if v.dtype == F32 else bf16.to_bf16(v)
    if v.dtype == BF16:
        return bf16.from_bf16(v, npd)
    return v.astype(npd)
