"""Concrete (index) arithmetic follows Triton's rules, checked against closed forms:
C-style ``//`` and ``%``, fixed-width wrap-around, promotion with weak Python scalars."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.triton.language  # noqa: F401 - binds the tensor operators, as a kernel's import does
from kernbench.errors import KernelError
from kernbench.triton import dtypes as d
from kernbench.triton.value import concrete

RNG = np.random.default_rng(0)
A = RNG.integers(-1000, 1000, 64, dtype=np.int32)
B = RNG.integers(1, 50, 64, dtype=np.int32) * RNG.choice(np.array([-1, 1], np.int32), 64)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def test_floordiv_truncates_toward_zero_like_c() -> None:
    got = (concrete(A) // concrete(B)).value
    assert got.dtype == np.int32
    assert got.tolist() == [_trunc_div(int(a), int(b)) for a, b in zip(A, B, strict=True)]


def test_mod_has_the_sign_of_the_dividend() -> None:
    got = (concrete(A) % concrete(B)).value
    want = [int(a) - _trunc_div(int(a), int(b)) * int(b) for a, b in zip(A, B, strict=True)]
    assert got.tolist() == want
    assert (concrete(np.int32(-7)) % 3).value == -1 and (concrete(np.int32(-7)) // 2).value == -3


def test_int32_arithmetic_wraps_around() -> None:
    big = concrete(np.int32(2**31 - 1))
    assert (big + 1).value == -(2**31)
    prod = (concrete(np.int32(70000)) * 70000).value
    assert prod.dtype == np.int32 and int(prod) == (70000 * 70000 + 2**31) % 2**32 - 2**31


def test_int64_after_to_does_not_wrap() -> None:
    x = concrete(np.int32(70000)).to(d.int64) * 70000
    assert x.dtype is d.int64 and int(x.value) == 70000 * 70000


@pytest.mark.parametrize(("a", "a_scalar", "b", "b_scalar", "want"), [
    (d.float16, False, d.float32, True, d.float16),   # a weak float scalar keeps fp16
    (d.int32, False, d.float32, True, d.float32),     # ... but makes an int tensor fp32
    (d.int8, False, d.int32, True, d.int8),           # a Python int keeps int8
    (d.int8, False, d.int32, False, d.int32),         # two tensors: the wider integer
    (d.int32, False, d.uint32, False, d.uint32),      # same width: unsigned wins
    (d.float16, False, d.bfloat16, False, d.float32),
    (d.bfloat16, False, d.bfloat16, False, d.bfloat16),
])
def test_promotion_follows_triton(a, a_scalar, b, b_scalar, want) -> None:
    assert d.computation_type(a, a_scalar, b, b_scalar) is want


def test_true_division_of_integers_is_float32_and_fp16_divides_in_float32() -> None:
    assert (concrete(np.int32(7)) / 2).dtype is d.float32
    assert d.truediv_type(d.float16, False, d.float32, True) is d.float32


def test_a_python_int_out_of_range_of_the_tensor_type_is_refused() -> None:
    with pytest.raises(KernelError, match="out of range for type int8"):
        concrete(np.int8(1)) + 1000


def test_cast_truncates_floats_and_wraps_integers() -> None:
    assert concrete(np.array([-2.7, 2.7], np.float32)).to(d.int32).value.tolist() == [-2, 2]
    assert int(concrete(np.int32(300)).to(d.int8).value) == 44
    assert concrete(np.array([0.0, 0.5], np.float32)).to(d.int1).value.tolist() == [False, True]


def test_comparisons_are_int1_and_combine_with_and() -> None:
    offs = concrete(np.arange(8, dtype=np.int32))
    m = (offs >= 2) & (offs < 5)
    assert m.dtype is d.int1 and m.value.tolist() == [False] * 2 + [True] * 3 + [False] * 3


def test_broadcasting_with_none_indexing() -> None:
    r, c = concrete(np.arange(4, dtype=np.int32)), concrete(np.arange(8, dtype=np.int32))
    offs = r[:, None] * 8 + c[None, :]
    assert offs.shape == (4, 8) and offs.value.ravel().tolist() == list(range(32))


def test_trans_without_dims_reverses_the_axes() -> None:
    from kernbench.triton import core

    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    assert core.trans(concrete(x)).value.tolist() == x.transpose(2, 1, 0).tolist()
    assert core.trans(concrete(x[0])).shape == (4, 3)
    assert core.trans(concrete(x), 1, 0, 2).value.tolist() == x.transpose(1, 0, 2).tolist()


def test_rand_of_float_offsets_is_refused() -> None:
    from kernbench.triton import random

    with pytest.raises(KernelError, match=r"tl\.rand offsets must be an integer, got "):
        random.rand(1, concrete(np.float32(1.5)))
