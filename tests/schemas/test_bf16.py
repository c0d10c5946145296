"""schemas/bf16.py against ml_dtypes, bit for bit: every bf16 pattern, large random samples."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernbench.schemas import bf16

BF16 = np.dtype(ml_dtypes.bfloat16)
ALL = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)  # every bf16 bit pattern


def _f32_sample(n: int = 1 << 21) -> np.ndarray:
    """Random float32 bit patterns (NaNs with payloads, infinities, subnormals included),
    values next to bf16 rounding midpoints, and the specials."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    mid = (rng.integers(0, 1 << 16, n // 4, dtype=np.uint32) << 16) | 0x8000
    near = np.concatenate([mid, mid - 1, mid + 1])
    sub = rng.integers(0, 1 << 23, n // 8, dtype=np.uint32)  # subnormals, both signs
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                        0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F7FFFFF,
                        0x7F7F8000, 0x7F7F7FFF, 1, 0x8000, 0x8001, 0x18000], np.uint32)
    return np.concatenate([bits, near, sub, sub | 0x80000000, special]).view(np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype.itemsize == b.dtype.itemsize
    assert a.shape == b.shape
    ua, ub = (x.view(f"u{x.dtype.itemsize}").reshape(-1) for x in (a, b))
    bad = np.flatnonzero(ua != ub)
    assert not len(bad), f"{len(bad)} differ, first at {bad[0]}: {ua[bad[0]]:#x} != {ub[bad[0]]:#x}"


def test_bf16_to_f32_is_ml_dtypes_cast_for_every_pattern():
    _same_bits(bf16.to_f32(ALL), ALL.view(BF16).astype(np.float32))


def test_f32_to_bf16_rounds_like_ml_dtypes_on_a_large_sample():
    x = _f32_sample()
    with np.errstate(all="ignore"):
        _same_bits(bf16.f32_to_bf16(x), x.astype(BF16))


def test_f32_to_bf16_round_trips_every_pattern():
    f = ALL.view(BF16).astype(np.float32)
    _same_bits(bf16.f32_to_bf16(f), f.astype(BF16))  # NaNs become the quiet NaN of their sign
    assert (bf16.f32_to_bf16(f)[~np.isnan(f)] == ALL[~np.isnan(f)]).all()


def test_round_bf16_is_the_round_trip_through_ml_dtypes():
    x = _f32_sample(1 << 18)
    with np.errstate(all="ignore"):
        _same_bits(bf16.round_bf16(x), x.astype(BF16).astype(np.float32))


def test_f64_to_bf16_rounds_once_like_ml_dtypes():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1 << 20) * np.exp2(rng.integers(-140, 130, 1 << 20))
    # values a hair above a bf16 midpoint: float32 would round them onto the midpoint
    mids = bf16.to_f32(rng.integers(0, 0x7F80, 1 << 16, dtype=np.uint32).astype(np.uint16))
    hair = mids.astype(np.float64) * (1 + 2.0 ** -8) * (1 + 2.0 ** -40)
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 1e-300,
                        5e-324, 3.4028235677973366e38, 3.39e38, 1.0 + 2 ** -8 + 2 ** -30])
    for sample in (x, hair, -hair, special):
        with np.errstate(all="ignore"):
            _same_bits(bf16.to_bf16(sample), sample.astype(BF16))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.float16, np.bool_, np.float64])
def test_to_bf16_from_other_dtypes_is_ml_dtypes_cast(dtype):
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind == "i":
        info = np.iinfo(dtype)
        x = np.concatenate([rng.integers(info.min, info.max, 1 << 18, dtype=dtype, endpoint=True),
                            np.array([info.min, info.max, 0, 16777217, 33023], np.int64)
                            .astype(dtype)])
    elif dtype is np.bool_:
        x = rng.integers(0, 2, 1000).astype(bool)
    elif dtype is np.float16:
        x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    else:
        x = rng.standard_normal(1 << 18)
    with np.errstate(all="ignore"):
        _same_bits(bf16.to_bf16(x), x.astype(BF16))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int8,
                                   np.int16, np.int64, np.uint8, np.bool_])
def test_from_bf16_is_ml_dtypes_cast_for_every_pattern(dtype):
    with np.errstate(all="ignore"):
        want = ALL.view(BF16).astype(dtype)
    _same_bits(bf16.from_bf16(ALL, dtype), want)


def test_full_is_np_full_of_bfloat16():
    for value in (0.1, -3.0, 1.0 + 2 ** -8 + 2 ** -30, float("inf"), float("nan"), 1e300,
                  7, True, 16777217, -(2 ** 40) - 1):
        _same_bits(bf16.full((2, 3), value), np.full((2, 3), value, BF16))


def test_conversions_keep_shape_and_layout():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)
    assert bf16.f32_to_bf16(x).shape == (4, 2, 3)
    np.testing.assert_array_equal(bf16.round_bf16(x), x)
    t = bf16.f32_to_bf16(np.arange(6, dtype=np.float32).reshape(2, 3)).T
    np.testing.assert_array_equal(bf16.to_f32(t), np.arange(6, dtype=np.float32).reshape(2, 3).T)
