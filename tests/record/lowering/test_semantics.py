"""Emit-time kernel errors: a KernelError subclass naming the kernel's file:line."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import (
    BoundsError,
    DtypeError,
    KernelError,
    ShapeError,
    SpaceError,
)
from kernbench.trace.hw import HwConfig

HERE = Path(__file__).name


def _line_of(fn, needle: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if needle in text)


@kb.kernel
def bad_dot(x):
    a = tl.zeros((4, 8), tl.float32)
    b = tl.zeros((4, 8), tl.float32)
    tl.dot(a, b)  # BAD


@kb.kernel
def bad_elementwise(x):
    a = tl.zeros((4, 8), tl.float32)
    b = tl.zeros((3, 8), tl.float32)
    a + b  # BAD


@kb.kernel
def bad_reshape(x):
    a = tl.zeros((4, 8), tl.float32)
    tl.reshape(a, (5, 6))  # BAD


@kb.kernel
def bad_broadcast(x):
    a = tl.zeros((3, 8), tl.float32)
    tl.broadcast(a, (8, 8))  # BAD


@kb.kernel
def bad_copy_shape(x):
    a = tl.zeros((4,), tl.float32)
    tl.copy_to(a, tl.zeros((5,), tl.float32))  # BAD


@kb.kernel
def bad_copy_dtype(x):
    a = tl.zeros((4,), tl.float32)
    tl.copy_to(a, tl.zeros((4,), tl.bfloat16))  # BAD


@kb.kernel
def bad_load_extent(x):
    tl.load(x + 10, (8,), tl.float32)  # BAD


@kb.kernel
def bad_store_extent(x):
    tl.store(x - 1, tl.zeros((2,), tl.float32))  # BAD


@kb.kernel
def bad_load_dtype(x):
    tl.load(x, (4,), tl.bfloat16)  # BAD


@kb.kernel
def bad_overflow(x):
    keep = [tl.zeros((1024,), tl.float32) for _ in range(300)]  # BAD
    del keep


@kb.kernel
def bad_copy_space(x):
    h = tl.zeros((4,), tl.float32)
    tl.copy_to(h, tl.reshape(h, (4,)))
    tl.load(x, (4,), tl.float32, out=tl.trans(tl.reshape(h, (2, 2))))  # BAD


CASES = [
    (bad_dot, ShapeError, r"dot shapes \[4, 8\] @ \[4, 8\]"),
    (bad_elementwise, ShapeError, r"shapes \[4, 8\] and \[3, 8\] do not broadcast"),
    (bad_reshape, ShapeError, r"reshape of \[4, 8\] \(128 bytes\) to \[5, 6\] \(120 bytes\)"),
    (bad_broadcast, ShapeError, r"cannot broadcast \[3, 8\] to \[8, 8\]"),
    (bad_copy_shape, ShapeError, r"copy_to shapes differ: dst \[4\] vs src \[5\]"),
    (bad_copy_dtype, DtypeError, r"copy_to dtypes differ: dst float32 vs src bfloat16"),
    (bad_load_extent, BoundsError, r"load of 8 elements at x\+10 is outside tensor 'x' \(16"),
    (bad_store_extent, BoundsError, r"store of 2 elements at x\+-1 is outside tensor 'x'"),
    (bad_load_dtype, DtypeError, r"load dtype bfloat16 differs from tensor 'x' dtype float32"),
    (bad_overflow, kb.ScratchOverflowError,
     r"requested 4096 bytes at cursor 1048576 with budget 1048576 bytes"),
    (bad_copy_space, SpaceError, r"load out= must be a plain TCM handle"),
]


@pytest.mark.parametrize("kernel,error,pattern", CASES, ids=[c[0].__name__ for c in CASES])
def test_kernel_mistake_raises_at_emit_time_naming_the_line(rec, kernel, error, pattern):
    line = _line_of(kernel.fn, "# BAD")
    with pytest.raises(error, match=pattern) as info:
        rec(kernel, {"x": kb.tensor((16,), "float32")})
    assert isinstance(info.value, KernelError)
    assert f"{HERE}:{line}" in str(info.value)
    assert info.value.src.endswith(f"{HERE}:{line}")


def test_scratch_overflow_names_the_allocation_site(rec):
    with pytest.raises(kb.ScratchOverflowError, match=r"allocation at .*test_semantics.py:\d+"):
        rec(bad_overflow, {"x": kb.tensor((16,), "float32")}, hw=HwConfig())


def test_tl_outside_a_kernel_is_a_kernel_error():
    with pytest.raises(KernelError, match="only valid inside a kernel"):
        tl.zeros((4,), tl.float32)


def test_the_truth_value_of_a_block_of_more_than_one_element_is_refused(rec):
    """``if`` on a handle is a decision on one element (a guard, ADR-0840); a block of two
    has no truth value (tests/record/guards hold the one-element decisions)."""
    @kb.kernel
    def truthy(x):
        if tl.zeros((2,), tl.float32):
            pass

    with pytest.raises(KernelError, match=r"needs one element; a \[2\] block holds 2"):
        rec(truthy, {"x": kb.tensor((1,), "float32")})


def test_elementwise_broadcasts_numpy_style_without_logging_the_broadcast(rec):
    @kb.kernel
    def scale_rows(x):
        a = tl.zeros((8, 16), tl.float32)
        b = tl.full((8, 1), 2.0, tl.float32)
        tl.store(x, a * b)

    trace = rec(scale_rows, {"x": kb.tensor((8, 16), "float32")})
    names = trace.ops["name"].cast(str).to_list()
    assert names == ["fill", "fill", "mul", "dma_write"]
    mul = trace.ops.filter(trace.ops["name"].cast(str) == "mul").to_dicts()[0]
    assert mul["output"]["shape"] == [8, 16] and mul["num_elements"] == 128


def test_views_log_no_op_and_keep_the_buffer(rec):
    @kb.kernel
    def views(x):
        a = tl.zeros((4, 8), tl.float32)
        t = tl.trans(a)
        r = tl.reshape(a, (2, -1))
        assert t.shape == (8, 4) and t.transposed and t.addr == a.addr
        assert r.shape == (2, 16) and r.addr == a.addr and r.nbytes == a.nbytes

    trace = rec(views, {"x": kb.tensor((1,), "float32")})
    assert trace.ops["name"].cast(str).to_list() == ["fill"]


def test_scalar_operands_are_recorded_in_attrs(rec):
    @kb.kernel
    def scalars(x):
        a = tl.zeros((4,), tl.float32)
        1.0 - a
        a / 2

    trace = rec(scalars, {"x": kb.tensor((1,), "float32")})
    attrs = trace.ops["attrs"].to_list()
    assert attrs[1] == '{"scalars":[[0,1.0]]}'
    assert attrs[2] == '{"scalars":[[1,2]]}'
