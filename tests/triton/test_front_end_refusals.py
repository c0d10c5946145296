"""What Triton's compiler rejects, or kernbench cannot record, is a one-line KernelError
naming the kernel's file:line — never wrong numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import BoundsError, KernelError

HERE = re.escape(f"{__name__.replace('.', '/')}.py")


@triton.jit
def dtype_as_constructor(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.float32(1.0))


@triton.jit
def ragged_arange(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


@triton.jit
def branch_on_block(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    if v > 0:  # a decision on data takes a scalar (tests/triton/test_guards.py)
        tl.store(x_ptr, v)


@triton.jit
def unsupported_call(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r",
                                                                    [v], tl.float32, True, 1))


@triton.jit
def tensor_axis(x_ptr, BLOCK: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr, tl.sum(v, axis=tl.program_id(0)))


@triton.jit
def runtime_block(x_ptr, n):
    tl.store(x_ptr + tl.arange(0, n), 1.0)


@triton.jit
def python_error(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + BLOCK // 0, 1.0)


@triton.jit
def out_of_bounds(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)


def _record(tmp_path, kernel, block: int, n: int = 8, **meta) -> None:
    c = kbt.case(kernel, (1,), np.zeros(n, np.float32), BLOCK=block, outputs=["x_ptr"],
                 **meta)
    kb.record(c, out=tmp_path / "t.ktrace")


@pytest.mark.parametrize(("kernel", "block", "match"), [
    (dtype_as_constructor, 8, r"tl\.float32\(1\.0\) calls a dtype as a value constructor"),
    (ragged_arange, 6, r"arange\(0, 6\) has length 6, not a power of two"),
    (branch_on_block, 8, r"the truth value of a \[8\] block is ambiguous"),
    (unsupported_call, 8, r"tl\.inline_asm_elementwise is not supported by kernbench: "),
    (tensor_axis, 8, r"axis must be a tl\.constexpr, got a tensor"),
    (python_error, 8, r"ZeroDivisionError"),
], ids=["dtype-constructor", "arange-not-power-of-two", "if-on-a-block-of-data",
        "unsupported-call", "tensor-axis", "python-exception"])
def test_refusal_names_the_kernel_line(tmp_path, kernel, block, match) -> None:
    with pytest.raises(KernelError, match=rf"^{HERE}:\d+: .*{match}"):
        _record(tmp_path, kernel, block)


def test_non_constexpr_block_size_is_refused(tmp_path) -> None:
    c = kbt.case(runtime_block, (1,), np.zeros(8, np.float32), 8, outputs=["x_ptr"])
    with pytest.raises(KernelError, match=rf"^{HERE}:\d+: arange end must be a tl.constexpr"):
        kb.record(c, out=tmp_path / "t.ktrace")


def test_unmasked_out_of_bounds_store_names_the_first_bad_index(tmp_path) -> None:
    with pytest.raises(BoundsError, match=rf"^{HERE}:\d+: .*offset 8 at tile index \[8\].*"
                                          r"8 elements"):
        _record(tmp_path, out_of_bounds, 16)


def test_unsupported_array_dtype_is_one_line(tmp_path) -> None:
    with pytest.raises(kb.BadInputError, match="dtype uint16, which kernbench's trace format "
                                               r"does not hold \(bfloat16 is held as uint16"):
        kbt.case(out_of_bounds, (1,), np.zeros(8, np.uint16), BLOCK=8, outputs=["x_ptr"])
