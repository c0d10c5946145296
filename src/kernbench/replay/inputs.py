"""The initial contents of HBM tensors, generated as `kb.randn` etc. define them, faster.

``kb.randn(seed, scale)`` is ``np.random.default_rng(seed).standard_normal(shape,
dtype=np.float32) * scale`` cast to the tensor dtype. Here the multiply is done in place
(and skipped for scale 1.0, where it is the identity on every float32, -0.0 and NaN
included), so no second float32 array is made; the cast is numpy's (ml_dtypes for
bfloat16). Bit-identical to ``Init.make``; tests/replay/test_inputs.py checks it.
"""

from __future__ import annotations

import numpy as np

from kernbench.case import Init
from kernbench.schemas.dtypes import DType


def _randn(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    x = np.random.default_rng(init.seed).standard_normal(shape, dtype=np.float32)
    if init.scale != 1.0:
        np.multiply(x, init.scale, out=x)
    return x if x.dtype == dtype.np else x.astype(dtype.np)


#: fast makers by init kind; other kinds use ``Init.make``
FAST = {"randn": _randn}


def make_initial(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """``init.make(shape, dtype)``, bit for bit, made faster where it can be."""
    fast = FAST.get(init.kind)
    return fast(init, shape, dtype) if fast is not None else init.make(shape, dtype)
