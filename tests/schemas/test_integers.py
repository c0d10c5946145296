"""The integer types of trace version 3 (int64, uint32, uint8, int16) in the schemas: the
trace format's promotion of them is C's (as Triton's, one rule in ``schemas/policy.py``), a
bitcast is the same bits, and uint16 stays out."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernbench.schemas import dtypes
from kernbench.schemas.ops import OPS, Op
from kernbench.schemas.policy import KERNBENCH, TRITON

INTS = ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64"]


def test_the_new_integers_are_trace_dtypes_with_their_numpy_storage():
    for name in ("int64", "uint32", "uint8", "int16"):
        d = dtypes.by_name(name)
        assert d.np == np.dtype(name) == d.storage and d.itemsize == np.dtype(name).itemsize
        assert not d.is_float and name in dtypes.V3_DTYPES
    assert "uint16" not in dtypes.DTYPES and "bfloat16" in dtypes.WHY_NOT["uint16"]


@pytest.mark.parametrize(("a", "b"), [p for p in itertools.combinations(INTS, 2)
                                      if dtypes.V3_DTYPES & set(p)])
def test_two_integer_tensors_promote_as_c_and_triton_do(a, b):
    """C's usual conversions, closed form: the wider type; at equal width the unsigned one;
    a wider signed type holds a narrower unsigned one. Triton's policy agrees."""
    bits = {n: 1 if n == "bool" else np.dtype(n).itemsize * 8 for n in INTS}
    signed = {n: n.startswith("int") for n in INTS}
    if bits[a] != bits[b]:
        want = a if bits[a] > bits[b] else b
    else:
        want = a if not signed[a] else b
    got = KERNBENCH.operands(((a, False), (b, False)), False)
    assert got == want == TRITON.operands(((a, False), (b, False)), False)


def test_floats_win_over_the_new_integers():
    for n in ("int64", "uint32", "uint8", "int16"):
        assert KERNBENCH.operands(((n, False), ("float16", False)), False) == "float16"
        assert KERNBENCH.operands(((n, False), ("float32", False)), False) == "float32"
    with pytest.raises(KeyError, match="int64 and int32 promote by C's integer rules"):
        dtypes.promote_names("int64", "int32")


@pytest.mark.parametrize(("src", "dst"), [("float32", "uint32"), ("uint32", "int32"),
                                          ("int16", "float16"), ("int64", "int64")])
def test_a_bitcast_is_the_same_bits_under_both_policies(src, dst):
    x = np.random.default_rng(0).integers(0, 2**16, 12).astype(np.uint16).view(np.uint8)
    x = np.resize(x, 48).view(src)  # any bit patterns (NaN payloads of floats too)
    sem = OPS[Op.CAST].sem
    for policy in (KERNBENCH, TRITON):
        got = sem.evaluate([x], {"dtype": dst, "bitcast": True}, policy)
        assert got.dtype == np.dtype(dst) and got.tobytes() == x.tobytes()
    with pytest.raises(ValueError, match="bitcast of int64 to int32 changes the bit width"):
        sem.evaluate([np.zeros(2, np.int64)], {"dtype": "int32", "bitcast": True}, KERNBENCH)
