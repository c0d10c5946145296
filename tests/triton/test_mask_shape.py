"""A mask of the wrong shape is a ShapeError naming the kernel's file:line and both shapes,
not numpy's ``_stride_tricks_impl.py`` (issue 27, point 7)."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import ShapeError
from kernbench.triton.launch import _user_src

HERE = re.escape(f"{__name__.replace('.', '/')}.py")


@triton.jit
def load_mask(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = tl.arange(0, BLOCK // 2) < 3
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m))  # LINE load


@triton.jit
def loaded_mask(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = tl.load(x_ptr + tl.arange(0, BLOCK // 2)) > 0
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m))  # LINE loaded


@triton.jit
def store_mask(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = tl.arange(0, BLOCK // 2) < 3
    tl.store(y_ptr + offs, tl.load(x_ptr + offs), mask=m)  # LINE store


@triton.jit
def atomic_mask(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = tl.arange(0, BLOCK // 2) < 3
    tl.atomic_add(y_ptr + offs, tl.load(x_ptr + offs), mask=m)  # LINE atomic


def _line(tag: str) -> int:
    lines = inspect.getsource(inspect.getmodule(_line)).splitlines()  # type: ignore[arg-type]
    return next(i for i, s in enumerate(lines, 1) if s.endswith(f"# LINE {tag}"))


@pytest.mark.parametrize(("kernel", "tag", "what"), [
    (load_mask, "load", "tl.load"), (loaded_mask, "loaded", "tl.load"),
    (store_mask, "store", "tl.store"), (atomic_mask, "atomic", "tl.atomic_add"),
], ids=["load", "load-loaded-mask", "store", "atomic"])
def test_wrong_shape_mask_names_the_kernel_line(tmp_path, kernel, tag, what) -> None:
    c = kbt.case(kernel, (1,), np.ones(16, np.float32), np.zeros(16, np.float32), BLOCK=16,
                 outputs=["y_ptr"])
    with pytest.raises(ShapeError, match=rf"^{HERE}:{_line(tag)}: {re.escape(what)}: "
                                         r"pointer block \[16\], mask \[8\]") as info:
        kb.record(c, out=tmp_path / "t.ktrace")
    assert "_stride_tricks" not in str(info.value) and "numpy" not in str(info.value)


def test_an_error_inside_numpy_names_the_users_line_not_numpys() -> None:
    try:
        np.broadcast_shapes((16,), (8,))  # LINE numpy
    except ValueError as exc:
        src = _user_src(exc)
    assert src is not None and re.fullmatch(rf"{HERE}:{_line('numpy')}", src)
