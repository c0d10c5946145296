"""Dtype conversions on the replay hot path.

A bfloat16 is the upper half of a float32, so bf16 -> f32 is exact as a 16-bit left shift
of the raw bits (one pass, no rounding, NaN payloads kept); numpy does it in one ufunc call.
The other direction rounds (to nearest even) and stays with ``ml_dtypes``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
_U16, _U32 = np.dtype(np.uint16), np.dtype(np.uint32)


def bf16_to_f32(v: np.ndarray) -> np.ndarray:
    """A new float32 array equal to the bfloat16 array ``v`` (any layout), by shifting."""
    return np.left_shift(v.view(_U16), 16, dtype=_U32).view(F32)


def to_f32(v: np.ndarray) -> np.ndarray:
    """``v`` as a new float32 array (bfloat16 by shifting, others by numpy's cast)."""
    return bf16_to_f32(v) if v.dtype == BF16 else v.astype(F32)
