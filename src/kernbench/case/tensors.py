"""HBM tensors of a case and how their initial contents are made (inits as plain JSON)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernbench.errors import BadInputError
from kernbench.schemas import bf16
from kernbench.schemas.dtypes import DType, by_name

ROLES = ("input", "output", "inout")


@dataclass(frozen=True)
class Init:
    """How a tensor's initial contents are made; serialisable as plain JSON."""

    kind: str  # "randn" | "zeros" | "arange" | "data"
    seed: int = 0
    scale: float = 1.0
    array: np.ndarray | None = field(default=None, compare=False, repr=False)
    #: ``array`` holds stored bytes in the dtype's storage (bf16 as uint16 bits)
    stored: bool = field(default=False, compare=False, repr=False)

    def to_json(self) -> str:
        body: dict[str, Any] = {"kind": self.kind}
        if self.kind == "randn":
            body.update(seed=self.seed, scale=self.scale)
        return json.dumps(body, sort_keys=True)

    def make(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        """The initial contents as an array of ``dtype.np`` (bfloat16: ``ml_dtypes``)."""
        out = self.make_storage(shape, dtype)
        return out if out.dtype == dtype.np else out.view(dtype.np)

    def make_storage(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        """The initial contents in ``dtype.storage`` (bfloat16 as uint16 bits; the same
        bytes as ``make``), without importing ``ml_dtypes``."""
        return INIT_MAKERS[self.kind](self, shape, dtype)

    def storage_view(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        """``make_storage``'s contents to read, never to write: a ``kb.data`` array already
        in ``dtype.storage`` is handed over as it is (a 134 MB input is not copied once
        more to be written out or put in place); every other init is made as usual."""
        if self.kind == "data":
            return _data_view(self, shape, dtype)
        return self.make_storage(shape, dtype)

    def make_into(self, out: np.ndarray, dtype: DType, zeroed: bool = False) -> None:
        """Write the initial contents into ``out`` (``dtype.storage``, C-contiguous, the
        tensor's shape), as ``make_storage`` would make them; ``zeroed``: ``out`` holds
        zeros already. Replay fills its memory here: ``randn`` generates into place (float32)
        or rounds its draws straight into ``out`` (bfloat16), with no other copy."""
        if self.kind == "zeros":
            if not zeroed:
                out[...] = 0
        elif self.kind == "randn" and dtype.storage in (np.float32, bf16.STORAGE):
            rng = np.random.default_rng(self.seed)
            if dtype.storage == np.float32:
                rng.standard_normal(out.shape, dtype=np.float32, out=out)
                if self.scale != 1.0:
                    np.multiply(out, self.scale, out=out)
            else:
                x = rng.standard_normal(out.shape, dtype=np.float32)
                if self.scale != 1.0:
                    np.multiply(x, self.scale, out=x)
                bf16.f32_to_bf16(x, out=out)
        else:
            out[...] = self.storage_view(out.shape, dtype)


def _cast(x: np.ndarray, dtype: DType) -> np.ndarray:
    """``x.astype(dtype.np)`` in the dtype's storage."""
    if dtype.name == "bfloat16":
        return bf16.to_bf16(x)
    return x if x.dtype == dtype.storage else x.astype(dtype.storage)


def _randn(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """``default_rng(seed).standard_normal(shape, float32) * scale`` cast to the dtype; the
    multiply in place (skipped for scale 1.0, the identity on every float32, -0.0 and NaN
    included), so no second float32 array is made. Both phases make inputs here."""
    x = np.random.default_rng(init.seed).standard_normal(shape, dtype=np.float32)
    if init.scale != 1.0:
        np.multiply(x, init.scale, out=x)
    return _cast(x, dtype)


def _zeros(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    return np.zeros(shape, dtype=dtype.storage)


def _arange(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    return _cast(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape), dtype)


def _data_view(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """A ``kb.data`` array in ``dtype.storage``: the array itself (or a view of its bits)
    when no conversion is needed, read only."""
    arr = np.asarray(init.array)
    if arr.shape != tuple(shape):
        raise BadInputError(f"kb.data array has shape {arr.shape}, tensor wants {tuple(shape)}")
    if init.stored:
        return arr.astype(dtype.storage, copy=False)
    if dtype.name == "bfloat16" and arr.dtype.name == "bfloat16":  # ml_dtypes' own: bits
        return arr.view(dtype.storage)
    return _cast(arr, dtype) if dtype.name == "bfloat16" else arr.astype(dtype.storage,
                                                                         copy=False)


def _data(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """A ``kb.data`` array in ``dtype.storage``, never sharing memory with ``init.array``."""
    out = _data_view(init, shape, dtype)
    return out.copy() if np.may_share_memory(out, init.array) else out


INIT_MAKERS: dict[str, Callable[[Init, tuple[int, ...], DType], np.ndarray]] = {
    "randn": _randn, "zeros": _zeros, "arange": _arange, "data": _data,
}


def init_from_json(text: str, data: bytes | memoryview | None = None, *,
                   shape: tuple[int, ...] = (), dtype: DType | None = None) -> Init:
    """Rebuild an Init from the JSON stored in ``tensors.parquet`` (plain data, no code)."""
    body = json.loads(text)
    kind = body.get("kind")
    if kind not in INIT_MAKERS:
        raise BadInputError(f"unknown init kind {kind!r}")
    if kind == "data":
        if data is None or dtype is None:
            raise BadInputError("init 'data' without stored bytes")
        arr = np.frombuffer(data, dtype=dtype.storage).reshape(shape)
        return Init("data", array=arr, stored=True)
    return Init(kind, seed=int(body.get("seed", 0)), scale=float(body.get("scale", 1.0)))


def randn(seed: int = 0, scale: float = 1.0) -> Init:
    return Init("randn", seed=seed, scale=scale)


def zeros() -> Init:
    return Init("zeros")


def arange() -> Init:
    return Init("arange")


def data(array: np.ndarray) -> Init:
    return Init("data", array=np.asarray(array))


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: DType
    init: Init
    role: str = "input"

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


def _init(init: Init | np.ndarray | None, shape: tuple[int, ...]) -> Init:
    """``init`` as an Init: None is zeros, an array (or nested list) is ``kb.data`` of it."""
    if init is None:
        return Init("zeros")
    if not isinstance(init, Init):
        if not isinstance(init, np.ndarray | list | tuple) and not hasattr(init, "__array__"):
            raise BadInputError(f"kb.tensor init {init!r} is not kb.randn(), kb.zeros(), "
                                "kb.arange(), kb.data(array) or an array")
        init = data(init)
    if init.kind == "data" and init.array is not None and init.array.shape != shape:
        raise BadInputError(f"kb.tensor init array has shape {init.array.shape}, the "
                            f"tensor {shape}")
    return init


def tensor(shape: tuple[int, ...] | list[int], dtype: str | DType, *,
           init: Init | np.ndarray | None = None, role: str = "input") -> TensorSpec:
    """Declare an HBM tensor of a case. ``init``: ``kb.randn()``, ``kb.zeros()`` (the
    default), ``kb.arange()``, ``kb.data(array)``, or the array itself."""
    if role not in ROLES:
        raise BadInputError(f"tensor role {role!r} is not one of {ROLES}")
    try:
        dt = by_name(dtype)
    except KeyError as exc:
        raise BadInputError(str(exc.args[0])) from None
    shape = tuple(int(s) for s in shape)
    if any(s <= 0 for s in shape):
        raise BadInputError(f"tensor shape {shape} has a non-positive dimension")
    return TensorSpec(shape, dt, _init(init, shape), role)
