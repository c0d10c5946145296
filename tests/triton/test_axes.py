"""A constexpr axis is normalised by the one rule every phase uses (``schemas.policy.axis_of``):
negative axes count from the end, and an axis outside ``[-ndim, ndim)`` is refused at the
kernel's line, as Triton's compiler refuses it, never wrapped into another axis."""

from __future__ import annotations

import re

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import ShapeError

HERE = re.escape(f"{__name__.replace('.', '/')}.py")
SHAPES: dict[str, tuple[int, ...]] = {}


def _see(name: str, x: object) -> None:
    SHAPES[name] = tuple(getattr(x, "shape"))  # noqa: B009 - a tl.tensor seen from Python


@triton.jit
def axes(x_ptr, out_ptr, OP: tl.constexpr, AXIS: tl.constexpr):
    offs = tl.arange(0, 4)[:, None] * 8 + tl.arange(0, 8)[None, :]
    x = tl.load(x_ptr + offs)
    if OP == "flip":
        y = tl.flip(x, AXIS)
    elif OP == "sum":
        y = tl.sum(x, AXIS)
    elif OP == "cumsum":
        y = tl.cumsum(x, AXIS)
    elif OP == "sort":
        y = tl.sort(x, AXIS)
    else:
        y = tl.expand_dims(x, AXIS)
    _see(f"{OP}{AXIS}", y)
    tl.store(out_ptr + offs, tl.sum(x, 1)[:, None] + tl.zeros_like(x))


def _record(tmp_path, op: str, axis: int) -> None:
    x = np.arange(32, dtype=np.float32)
    case = kbt.case(axes, (1,), x, np.zeros(32, np.float32), OP=op, AXIS=axis,
                    outputs=["out_ptr"])
    kb.record(case, tmp_path / f"{op}{axis}.ktrace")


@pytest.mark.parametrize(("op", "axis"), [("flip", 2), ("flip", -3), ("sum", 2), ("cumsum", -3),
                                          ("sort", 5), ("expand_dims", 3),
                                          ("expand_dims", -4)])
def test_an_axis_outside_the_block_is_refused_at_the_kernel_line(tmp_path, op, axis) -> None:
    with pytest.raises(ShapeError, match=rf"{HERE}:\d+: .*axis {axis} out of range"):
        _record(tmp_path, op, axis)


@pytest.mark.parametrize(("op", "axis", "shape"), [("sum", -1, (4,)), ("sum", -2, (8,)),
                                                   ("cumsum", -2, (4, 8)),
                                                   ("expand_dims", -1, (4, 8, 1)),
                                                   ("expand_dims", -3, (1, 4, 8)),
                                                   ("flip", -1, (4, 8))])
def test_a_negative_axis_counts_from_the_end(tmp_path, op, axis, shape) -> None:
    _record(tmp_path, op, axis)
    assert SHAPES[f"{op}{axis}"] == shape
