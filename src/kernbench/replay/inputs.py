"""The initial contents of HBM tensors, made as ``kb.randn`` etc. define them.

One definition for both phases: ``Init.make`` (``kernbench.case.tensors``), which makes
``randn`` without a second float32 array; tests/replay/test_pipeline.py checks it bit for bit
against the formula in docs/trace-format.md.
"""

from __future__ import annotations

import numpy as np

from kernbench.case import Init
from kernbench.schemas.dtypes import DType


def make_initial(init: Init, out: np.ndarray, dtype: DType) -> None:
    """Write a tensor's initial contents into ``out`` (its place in the store, zeros before)
    as stored: bfloat16 as uint16 bits, the bytes of ``init.make``, no ``ml_dtypes``."""
    init.make_into(out, dtype, zeroed=True)
