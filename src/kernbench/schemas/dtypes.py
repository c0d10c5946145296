"""Element types: the names stored in traces and their numpy equivalents.

``DType.storage`` is the numpy dtype that holds the values without ``ml_dtypes``: bfloat16
is stored as uint16 bits (``kernbench.schemas.bf16`` converts), every other type is its own.
``DType.np`` is the numpy dtype of the values themselves; for bfloat16 that is
``ml_dtypes.bfloat16``, imported on first use only (the import costs half a second, and
replay never needs it).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike


class DType:
    """A kernel-visible element type (``tl.float32`` ...). Compared by identity."""

    __slots__ = ("name", "_np", "storage", "itemsize", "is_float")

    def __init__(self, name: str, np_dtype: DTypeLike | None, storage: DTypeLike | None = None
                 ) -> None:
        self.name = name
        self._np = None if np_dtype is None else np.dtype(np_dtype)
        self.storage: np.dtype = np.dtype(storage if storage is not None else np_dtype)
        self.itemsize = self.storage.itemsize
        self.is_float = name in ("float32", "float16", "bfloat16")

    @property
    def np(self) -> np.dtype:
        """The numpy dtype of the values (bfloat16: ``ml_dtypes.bfloat16``, imported here)."""
        if self._np is None:
            import ml_dtypes

            self._np = np.dtype(ml_dtypes.bfloat16)
        return self._np

    def __repr__(self) -> str:
        return f"tl.{self.name}"

    def __reduce__(self):  # pragma: no cover - dtypes are singletons
        return (by_name, (self.name,))


float32 = DType("float32", np.float32)
float16 = DType("float16", np.float16)
bfloat16 = DType("bfloat16", None, np.uint16)
int32 = DType("int32", np.int32)
int8 = DType("int8", np.int8)
bool_ = DType("bool", np.bool_)
# the integer types of trace version 3 (``V3_DTYPES``, ADR-0580): Triton's int64 indices and
# targets, uint32 keys. uint16 is not one: bfloat16 is held as uint16 bits, and replay knows a
# bf16 operand by that storage (ADR-0581).
int64 = DType("int64", np.int64)
int16 = DType("int16", np.int16)
uint8 = DType("uint8", np.uint8)
uint32 = DType("uint32", np.uint32)

DTYPES: dict[str, DType] = {d.name: d for d in (float32, float16, bfloat16, int32, int8, bool_,
                                                int64, int16, uint8, uint32)}
#: the dtypes a trace of schema version 3 introduced; a trace that holds none of them (and no
#: bitcast) is written as before, at version 1 or 2
V3_DTYPES = frozenset({"int64", "int16", "uint8", "uint32"})
#: dtypes Triton has that the trace format refuses, and why (the refusal messages say it)
WHY_NOT = {"uint16": "bfloat16 is held as uint16 bits, so replay cannot tell a uint16 from it",
           "uint64": "kernbench's trace format holds integers up to int64",
           "float64": "kernbench computes in float32 at most"}

#: promotion order for mixed elementwise operands (numpy-like, bf16/f16 -> f32); the integers
#: of version 3 rank below the floats only: two integers of which one is a version-3 type
#: promote by C's rules (``schemas/policy.py``'s ``integer_promote``)
RANK = {"bool": 0, "int8": 1, "int32": 2, "bfloat16": 3, "float16": 3, "float32": 4,
        "uint8": 1, "int16": 2, "uint32": 2, "int64": 2}


def by_name(name: str | DType) -> DType:
    """The DType called ``name``; raises KeyError naming the known dtypes otherwise."""
    if isinstance(name, DType):
        return name
    try:
        return DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def promote_names(a: str, b: str) -> str:
    """The trace format's promotion of two dtype names: the higher rank; bfloat16 with
    float16 is float32 (the one rule; ``schemas/policy.py``'s KERNBENCH policy uses it)."""
    if a == b:
        return a
    ra, rb = RANK[a], RANK[b]
    if ra == rb:  # bfloat16 with float16
        if not (DTYPES[a].is_float and DTYPES[b].is_float):
            raise KeyError(f"{a} and {b} promote by C's integer rules (policy.integer_promote)")
        return "float32"
    return a if ra > rb else b


def promote(a: DType, b: DType) -> DType:
    """The result dtype of an elementwise op between ``a`` and ``b``."""
    return a if a is b else DTYPES[promote_names(a.name, b.name)]
