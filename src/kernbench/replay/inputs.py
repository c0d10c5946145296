"""The initial contents of HBM tensors, made as ``kb.randn`` etc. define them.

One definition for both phases: ``Init.make`` (``kernbench.case.tensors``), which makes
``randn`` without a second float32 array; tests/replay/test_pipeline.py checks it bit for bit
against the formula in docs/trace-format.md.
"""

from __future__ import annotations

import numpy as np

from kernbench.case import Init
from kernbench.schemas.dtypes import DType


def make_initial(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """``init.make_storage(shape, dtype)``: a tensor's initial contents as stored (bfloat16
    as uint16 bits, the bytes of ``init.make``), without importing ``ml_dtypes``."""
    return init.make_storage(shape, dtype)
