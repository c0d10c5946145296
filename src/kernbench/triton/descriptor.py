"""Tensor descriptors (TMA): host ``triton.tools.tensor_descriptor.TensorDescriptor``
arguments and in-kernel ``tl.make_tensor_descriptor`` / ``desc.load`` / ``desc.store``.

A descriptor is a block pointer without a position: parent geometry (shape, strides) and a
block shape; ``load(offsets)`` / ``store(offsets, value)`` name the position. Both lower onto
the block-pointer access with every dimension boundary-checked (ADR-0563): out-of-bounds
elements read as zero (``padding="nan"``: NaN), out-of-bounds stores are dropped. So a
descriptor access is the indexed block DMA a ``tl.make_block_ptr`` access is, priced the
same, and needs no op of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

import numpy as np

from kernbench.errors import BadInputError, KernelError, ShapeError
from kernbench.record.handle import HbmTensor
from kernbench.record.source import src_here
from kernbench.triton import dtypes as d
from kernbench.triton import memory
from kernbench.triton.value import Concrete, Pointer, Symbolic, plain

_PADDINGS = ("zero", "nan")


@dataclass
class TensorDescriptor:
    """kernbench's host descriptor (what ``triton.tools.tensor_descriptor`` resolves to
    without Triton): the fields of Triton's, without its GPU alignment checks, so a numpy
    array may be the base."""

    base: object  # a numpy array or a torch tensor
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"
    round_f32_to_tf32: bool = field(default=False)

    @staticmethod
    def from_tensor(tensor: Any, block_shape: list[int], padding: str = "zero",
                    round_f32_to_tf32: bool = False) -> TensorDescriptor:
        """A descriptor over all of a C-contiguous array (strides in elements)."""
        arr = np.asarray(tensor) if not hasattr(tensor, "stride") else None
        shape = list(tensor.shape)
        strides = (list(tensor.stride()) if arr is None
                   else [s // arr.itemsize for s in arr.strides])
        return TensorDescriptor(tensor, shape, strides, list(block_shape), padding,
                                round_f32_to_tf32)


def is_descriptor(x: object) -> TypeGuard[HostDescriptor]:
    """Triton's host ``TensorDescriptor`` or kernbench's (duck-typed by name and fields)."""
    return type(x).__name__ == "TensorDescriptor" and all(
        hasattr(x, f) for f in ("base", "shape", "strides", "block_shape"))


@dataclass(frozen=True)
class HostSpec:
    """A host descriptor argument's geometry (its base is the parameter's HBM tensor)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    padding: str


class HostDescriptor(Protocol):
    """What a host descriptor argument (Triton's or kernbench's) offers."""

    @property
    def shape(self) -> Sequence[int]: ...
    @property
    def strides(self) -> Sequence[int]: ...
    @property
    def block_shape(self) -> Sequence[int]: ...


def host_spec(name: str, desc: HostDescriptor) -> HostSpec:
    """The geometry of a host descriptor argument; BadInputError for an inconsistent one."""
    shape, strides = tuple(int(s) for s in desc.shape), tuple(int(s) for s in desc.strides)
    block = tuple(int(b) for b in desc.block_shape)
    pad = str(getattr(desc, "padding", "zero"))
    if not len(shape) == len(strides) == len(block) or not shape:
        raise BadInputError(f"descriptor {name}: shape {list(shape)}, strides "
                            f"{list(strides)} and block_shape {list(block)} differ in rank")
    if pad not in _PADDINGS:
        raise BadInputError(f"descriptor {name}: padding {pad!r} is not one of 'zero', 'nan'")
    return HostSpec(shape, strides, block, pad)


class tensor_descriptor:  # noqa: N801 - Triton's spelling
    """An in-kernel tensor descriptor: HBM tensor, element offset of its origin, geometry."""

    __slots__ = ("base", "offset", "shape", "strides", "block_shape", "padding")

    def __init__(self, base: HbmTensor, offset: int, shape: tuple[int, ...],
                 strides: tuple[int, ...], block: tuple[int, ...], padding: str) -> None:
        self.base, self.offset, self.shape, self.strides = base, offset, shape, strides
        self.block_shape, self.padding = block, padding

    @property
    def dtype(self) -> d.dtype:
        return d.from_kb(self.base.dtype)

    def _at(self, offsets: object, src: str) -> memory.block_ptr:
        offs = memory._ints(offsets, "descriptor offset", src)
        if len(offs) != len(self.block_shape):
            raise ShapeError(f"descriptor offsets {list(offs)} for a "
                             f"{len(self.block_shape)}-D descriptor", src)
        order = tuple(range(len(offs) - 1, -1, -1))
        return memory.block_ptr(self.base, self.offset, self.shape, self.strides, offs,
                                self.block_shape, order)

    def load(self, offsets: object) -> Concrete | Symbolic:
        """The block at ``offsets``; elements outside ``shape`` read as the padding."""
        p = self._at(offsets, src_here())
        return memory.load(p, boundary_check=tuple(range(len(self.shape))),
                           padding_option=self.padding)

    def store(self, offsets: object, value: object) -> None:
        """``value`` stored as the block at ``offsets``; elements outside ``shape`` dropped."""
        p = self._at(offsets, src_here())
        memory.store(p, value, boundary_check=tuple(range(len(self.shape))))

    if not TYPE_CHECKING:  # a checker sees only the members above
        def __getattr__(self, name: str) -> object:
            raise KernelError(f"tensor descriptor .{name} is not supported by kernbench (it "
                              "runs load and store)", src_here())


def make_tensor_descriptor(base: object, shape: object, strides: object, block_shape: object,
                           padding_option: object = "zero") -> tensor_descriptor:
    """``tl.make_tensor_descriptor``: a descriptor over the tensor ``base`` points into."""
    src = src_here()
    if not isinstance(base, Pointer) or base.shape != () or type(base.offsets) is not np.ndarray:
        raise KernelError(f"make_tensor_descriptor base must be a scalar pointer, got {base!r}",
                          src)
    shp = memory._ints(shape, "descriptor shape", src)
    st = memory._ints(strides, "descriptor stride", src)
    blk = memory.block_shape_of(block_shape, src)
    pad = plain(padding_option)
    if not len(shp) == len(st) == len(blk):
        raise ShapeError(f"make_tensor_descriptor: shape {list(shp)}, strides {list(st)} and "
                         f"block_shape {list(blk)} differ in rank", src)
    if pad not in _PADDINGS:
        raise KernelError(f"padding_option {pad!r} is not one of 'zero', 'nan'", src)
    return tensor_descriptor(base.base, int(base.offsets), shp, st, blk, pad)


def from_host(ptr: Pointer, spec: HostSpec) -> tensor_descriptor:
    """The descriptor a kernel parameter bound to a host descriptor sees."""
    assert isinstance(ptr.offsets, np.ndarray), "a parameter's pointer has concrete offsets"
    return tensor_descriptor(ptr.base, int(ptr.offsets), spec.shape, spec.strides,
                             spec.block_shape, spec.padding)


def load_tensor_descriptor(desc: tensor_descriptor, offsets: object) -> Concrete | Symbolic:
    return desc.load(offsets)


def store_tensor_descriptor(desc: tensor_descriptor, offsets: object, value: object) -> None:
    desc.store(offsets, value)
