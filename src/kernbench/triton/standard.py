"""kernbench's ``triton.language.standard``: the names kernels import from it (``_log2``,
the combine functions of ``tl.reduce``, ``xor_sum``, ``swizzle2d`` ...), written against the
front end's ``tl``. Any other name is the ``tl`` one (``tl.standard.sum`` is ``tl.sum``)."""

from __future__ import annotations

from kernbench.record.source import src_here
from kernbench.triton import arith, blocks, combine, core, mathops, sorting
from kernbench.triton import dtypes as d
from kernbench.triton.combine import Blocks
from kernbench.triton.value import Value, plain, tensor

#: an integer operand of index arithmetic: a Python int or an integer tensor
IntOperand = tensor | int


def _unwrap_if_constexpr(x: object) -> object:
    return plain(x)


def _log2(i: object) -> int:
    """floor(log2(i)) of a constexpr (0 for i <= 1), as Triton's."""
    n = int(plain(i))
    return 0 if n <= 1 else n.bit_length() - 1


def _is_power_of_two(i: object) -> bool:
    n = int(plain(i))
    return n > 0 and (n & (n - 1)) == 0


def _get_int_dtype(bitwidth: object, signed: object) -> d.dtype:
    return d.by_name(f"{'' if plain(signed) else 'u'}int{int(plain(bitwidth))}")


def _pick_sum_dtype(in_dtype: object, dtype: object) -> object:
    if plain(dtype) is not None:
        return plain(dtype)
    t = d.by_name(plain(in_dtype))
    if t.is_int() and t.bits < 32:
        return d.int32 if t.is_int_signed() else d.uint32
    return None


def _sum_combine(a: tensor, b: tensor) -> tensor:
    return a + b


def _prod_combine(a: tensor, b: tensor) -> tensor:
    return a * b


def _elementwise_max(a: tensor, b: tensor) -> tensor:
    return mathops.maximum(a, b)


def _elementwise_min(a: tensor, b: tensor) -> tensor:
    return mathops.minimum(a, b)


def _or_combine(x: tensor, y: tensor) -> tensor:
    return x | y


def _xor_combine(a: tensor, b: tensor) -> tensor:
    return a ^ b


def _arg_combine(better: str, value1: tensor, index1: tensor, value2: tensor, index2: tensor,
                 tie_break_left: object) -> tuple[tensor, tensor]:
    win = arith.binary(better, value1, value2)
    if plain(tie_break_left):
        tie = arith.binary("and_", arith.binary("eq", value1, value2),
                           arith.binary("lt", index1, index2))
        win = arith.binary("or_", win, tie)
    return arith.where(win, value1, value2), arith.where(win, index1, index2)


def _argmax_combine(value1: tensor, index1: tensor, value2: tensor, index2: tensor,
                    tie_break_left: object) -> tuple[tensor, tensor]:
    return _arg_combine("gt", value1, index1, value2, index2, tie_break_left)


def _argmin_combine(value1: tensor, index1: tensor, value2: tensor, index2: tensor,
                    tie_break_left: object) -> tuple[tensor, tensor]:
    return _arg_combine("lt", value1, index1, value2, index2, tie_break_left)


def _argmax_combine_tie_break_left(v1: tensor, i1: tensor, v2: tensor, i2: tensor
                                   ) -> tuple[tensor, tensor]:
    return _argmax_combine(v1, i1, v2, i2, True)


def _argmax_combine_tie_break_fast(v1: tensor, i1: tensor, v2: tensor, i2: tensor
                                   ) -> tuple[tensor, tensor]:
    return _argmax_combine(v1, i1, v2, i2, False)


def _argmin_combine_tie_break_left(v1: tensor, i1: tensor, v2: tensor, i2: tensor
                                   ) -> tuple[tensor, tensor]:
    return _argmin_combine(v1, i1, v2, i2, True)


def _argmin_combine_tie_break_fast(v1: tensor, i1: tensor, v2: tensor, i2: tensor
                                   ) -> tuple[tensor, tensor]:
    return _argmin_combine(v1, i1, v2, i2, False)


def xor_sum(input: tensor, axis: object = None, keep_dims: bool = False) -> Value | Blocks:  # noqa: A002
    return combine.reduce(input, axis, _xor_combine, keep_dims)


def reduce_or(input: tensor, axis: object, keep_dims: bool = False) -> Value | Blocks:  # noqa: A002
    return combine.reduce(input, axis, _or_combine, keep_dims)


def swizzle2d(i: IntOperand, j: IntOperand, size_i: IntOperand, size_j: IntOperand,
              size_g: IntOperand) -> tuple[IntOperand, IntOperand]:
    """Triton's grouped ordering of a 2-D grid (its own formula)."""
    ij = i * size_j + j
    size_gj = size_g * size_j
    group_id = ij // size_gj
    off_i = group_id * size_g
    size_g = mathops.minimum(size_i - off_i, size_g)
    ij = ij % size_gj
    return off_i + ij % size_g, ij // size_g


def squeeze(x: tensor, dim: object) -> tensor:
    shape = list(x.shape)
    ax = core.constexpr_axis(dim, x.shape, "squeeze dim", src_here())
    del shape[ax]
    return core.reshape(x, tuple(shape))


def unsqueeze(x: tensor, dim: object) -> tensor:
    return core.expand_dims(x, dim)


flip, interleave = blocks.flip, blocks.interleave


sort, topk = sorting.sort, sorting.topk


# The language's other names are this module's too (Triton's standard is where many of them
# live): kernbench.triton.language installs that look-up when it loads, so this module never
# imports the language (no import cycle).
