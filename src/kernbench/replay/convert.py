"""Dtype conversions on the replay hot path; bfloat16 is uint16 storage (``BF16``).

Replay never imports ``ml_dtypes``: a bf16 operand's view is uint16 bits (no other trace
dtype is uint16, so the dtype says it is bf16), read as float32 by a 16-bit shift and written
back rounded to nearest even, exactly as ``ml_dtypes`` casts (``kernbench.schemas.bf16``).
The conversions themselves are ``kernbench.schemas.storage``'s, shared with Phase 1's guard
evaluator.
"""

from __future__ import annotations

from kernbench.schemas.bf16 import to_f32 as bf16_to_f32
from kernbench.schemas.storage import BF16, F32, as_dtype, to_f32

__all__ = ["BF16", "F32", "bf16_to_f32", "to_f32", "as_dtype"]
