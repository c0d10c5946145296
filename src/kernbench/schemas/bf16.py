"""bfloat16 without ``ml_dtypes``: uint16 storage and exact numpy conversions.

A bfloat16 is the upper half of a float32, so bf16 -> f32 is a 16-bit left shift of the raw
bits (exact, NaN payloads kept). f32 -> bf16 rounds to nearest even on the bits; a NaN
becomes the quiet NaN of its sign (0x7FC0 / 0xFFC0), as ``ml_dtypes`` makes it. Every other
conversion is the one ``ml_dtypes.bfloat16``'s numpy casts perform, bit for bit
(tests/schemas/test_bf16.py compares all 65536 patterns and large random samples):

* to bf16 from float64, integers and bool: rounded once (exact in float64, round-to-odd
  to float32, then to nearest even); from float16: exactly through float32;
* from bf16 to float16: through float32, a NaN becoming float16's quiet NaN of its sign;
  to an integer: truncated, 0 where the value is NaN or outside the integer's range;
  to bool: nonzero; to float64: exact.

Importing ``ml_dtypes`` costs a replay process about half a second; replay and the bench
baseline keep bf16 as ``STORAGE`` (uint16) and never import it
(docs/adr/0515-bf16-storage-and-a-light-launcher.md).
"""

from __future__ import annotations

import numpy as np

STORAGE = np.dtype(np.uint16)
F32 = np.dtype(np.float32)
_U16, _U32, _U64 = np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)
_F16_QNAN = {False: np.uint16(0x7E00), True: np.uint16(0xFE00)}


def to_f32(bits: np.ndarray) -> np.ndarray:
    """A new float32 array equal to the bf16 ``bits`` (uint16 storage, any layout)."""
    return np.left_shift(bits.view(_U16), 16, dtype=_U32).view(F32)


#: elements converted at a time: the temporaries stay in cache and their memory bounded
CHUNK = 1 << 16


def _round_into(u: np.ndarray, tmp: np.ndarray, out: np.ndarray) -> None:
    """bf16 bits of the float32 bits ``u`` into ``out`` (``tmp``: uint32 scratch)."""
    np.right_shift(u, 16, out=tmp)
    np.bitwise_and(tmp, 1, out=tmp)
    np.add(tmp, 0x7FFF, out=tmp)
    np.add(tmp, u, out=tmp)  # u + 0x7FFF + lsb: wraps only for negative NaNs, fixed below
    np.right_shift(tmp, 16, out=tmp)
    out[...] = tmp
    nan = np.isnan(u.view(F32))
    if nan.any():
        out[nan] = np.where(np.right_shift(u[nan], 31) != 0, 0xFFC0, 0x7FC0)


def f32_to_bf16(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 values rounded to nearest even as bf16 bits, in chunks of ``CHUNK`` elements:
    a new uint16 array, or into ``out`` (uint16, C-contiguous, ``x``'s size)."""
    shape = np.shape(x)
    u = np.ascontiguousarray(x, F32).reshape(-1).view(_U32)
    n = u.size
    flat = np.empty(n, _U16) if out is None else out.reshape(-1)
    tmp = np.empty(min(n, CHUNK), _U32)
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        _round_into(u[lo:hi], tmp[:hi - lo], flat[lo:hi])
    return flat.reshape(shape) if out is None else out


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 ``x`` rounded to the nearest bf16 value, as float32 (``x.astype(bf16)
    .astype(f32)`` in one step)."""
    return to_f32(f32_to_bf16(x))


def _f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd (truncate, then set the last bit if inexact): a
    later rounding to nearest even to fewer than 23 bits is then the correctly rounded
    result of the float64, as if rounded once."""
    with np.errstate(all="ignore"):
        f = x.astype(F32)
        back = f.astype(np.float64)
    u = f.view(_U32).copy()
    finite = np.isfinite(x)
    over = np.abs(back) > np.abs(x)  # rounded away from zero: step back toward zero
    step = over & finite & (np.bitwise_and(u, 0x7FFFFFFF) != 0)
    u[step] -= 1
    inexact = finite & (back != x)
    u[inexact] |= 1
    return u.view(F32)


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Any numeric array as bf16 bits, exactly as ``x.astype(ml_dtypes.bfloat16)``;
    uint16 input is already bf16 (copied)."""
    x = np.asarray(x)
    if x.dtype == _U16:
        return x.copy()
    if x.dtype == np.float64 or x.dtype.kind in "iub":  # exact in float64, rounded once
        return f32_to_bf16(_f64_to_f32_odd(x.astype(np.float64)))
    with np.errstate(all="ignore"):
        return f32_to_bf16(np.asarray(x, F32))


def from_bf16(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """bf16 bits converted to ``dtype`` exactly as ``ml_dtypes.bfloat16``'s numpy cast; a
    new array. ``dtype`` uint16 means bf16 (a copy)."""
    dtype = np.dtype(dtype)
    if dtype == _U16:
        return bits.copy()
    f = to_f32(bits)
    if dtype == F32:
        return f
    if dtype.kind == "f":
        with np.errstate(all="ignore"):
            out = f.astype(dtype)
        if dtype == np.float16:
            nan = np.isnan(f)
            if nan.any():
                out.view(_U16)[nan] = np.where(np.signbit(f[nan]), _F16_QNAN[True],
                                               _F16_QNAN[False])
        return out
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        with np.errstate(all="ignore"):
            t = np.trunc(f).astype(np.float64)
            ok = (t >= float(info.min)) & (t < 2.0 ** (info.bits - (info.min < 0)))
            return np.where(ok, f, 0).astype(dtype)
    return f.astype(dtype)


def full(shape: tuple[int, ...], value: float | int | bool) -> np.ndarray:
    """``np.full(shape, value, bfloat16)`` as bits (numpy rounds a Python float to float32
    first there, then to bf16; an integer is converted as an int64 array would be)."""
    if isinstance(value, float):
        with np.errstate(all="ignore"):
            return np.full(shape, f32_to_bf16(np.array(value, F32)))
    return np.full(shape, to_bf16(np.array(value)))
