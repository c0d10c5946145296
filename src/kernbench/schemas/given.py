"""The semantics of the families whose output dtype the kernel gives (``Dt.GIVEN``: not
inferable from the inputs, so not ``OPS[op].sem``): ``dot``, ``fill`` and ``arange``.
Replay's executors and Phase 1's guard evaluator (``record/guards``) both compute with
these, then store the result in the output's dtype (``schemas.storage.as_dtype``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.schemas import bf16
from kernbench.schemas.storage import BF16


def dot(a: np.ndarray, b: np.ndarray, acc: np.ndarray | None = None) -> np.ndarray:
    """``a @ b (+ acc)`` of float32 operands, accumulated in float32 (GEMMs and
    ``tl.dot``; a composite's K-split child accumulates its tile into ``acc``)."""
    r = np.matmul(a, b)
    if acc is not None:
        r += acc
    return r


def fill(shape: tuple[int, ...], value: Any, npd: np.dtype) -> np.ndarray:
    """``np.full(shape, value)`` in the storage dtype ``npd`` (bfloat16: rounded once)."""
    with np.errstate(all="ignore"):
        if npd == BF16:
            return bf16.full(shape, value)
        return np.full(shape, value, dtype=npd)


def arange(start: int, shape: tuple[int, ...]) -> np.ndarray:
    """``start + arange(n)`` as int32, in ``shape``."""
    n = 1
    for s in shape:
        n *= s
    return np.arange(start, start + n, dtype=np.int32).reshape(shape)
