"""HBM as a recording with guards sees it: the case's tensors, their initial contents made
on first use (the bytes replay starts from: ``Init.storage_view``), and per tensor the
writes and atomics recorded so far (``Effect``), each at its place in time order.

Nothing here computes a value: ``evaluate.Evaluator`` rolls a tensor's effects forward to
the key of a read when a decision needs it (ADR-0840).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Any

import numpy as np

from kernbench.schemas.ops import Op


class TensorState:
    """One HBM tensor: where it lives, how its first contents are made, its effects."""

    __slots__ = ("name", "addr", "numel", "itemsize", "storage", "make", "initial_array",
                 "effects", "ordered")

    def __init__(self, name: str, addr: int, numel: int, storage: np.dtype,
                 make: Any) -> None:
        self.name, self.addr, self.numel, self.storage = name, addr, numel, storage
        self.itemsize = storage.itemsize
        self.make = make  # () -> the initial contents (storage, the tensor's shape)
        self.initial_array: np.ndarray | None = None
        self.effects: list[Effect] = []  # in recording order
        self.ordered: list[Effect] = []  # the same, by key (rebuilt when effects grew)

    def initial(self) -> np.ndarray:
        """The tensor's initial contents, flat (read only: made once)."""
        if self.initial_array is None:
            arr = np.ascontiguousarray(self.make()).reshape(-1)
            arr.flags.writeable = False
            self.initial_array = arr
        return self.initial_array

    def by_key(self) -> list[Effect]:
        if len(self.ordered) != len(self.effects):
            self.ordered = sorted(self.effects, key=_key)
        return self.ordered


class Access:
    """The elements of tensor ``t`` an op touches: ``index`` (flat positions, tile order)
    and ``sel`` (their tile positions; None: all), known when recorded; or, for offsets held
    in TCM, ``roles["offsets"]`` (and ``roles["mask"]``, or the static ``mask``) to evaluate
    first. ``roles`` also holds an atomic's ``value`` and ``cmp`` operands; ``shape`` is the
    tile's. ``static``: how to make ``index`` and ``sel`` when first needed, for elements
    known when recorded (most accesses are never evaluated)."""

    __slots__ = ("t", "index", "sel", "mask", "roles", "shape", "static")

    def __init__(self, t: TensorState, index: np.ndarray | None, sel: np.ndarray | None,
                 mask: np.ndarray | None, roles: dict[str, Any],
                 shape: tuple[int, ...], static: Any = None) -> None:
        self.t, self.index, self.sel, self.mask = t, index, sel, mask
        self.roles, self.shape, self.static = roles, shape, static

    @property
    def dynamic(self) -> bool:
        """The elements come from offsets held in TCM (evaluated first)."""
        return self.index is None and self.static is None


class Effect:
    """A write of HBM (``dma_write``, ``scatter``: ``value`` lands at its key) or an atomic
    (a read-modify-write at its key; ``value`` None, the operands in ``access.roles``)."""

    __slots__ = ("key", "access", "value", "op", "attrs")

    def __init__(self, key: tuple[int, int, int], access: Access, value: Any, op: Op,
                 attrs: dict[str, Any]) -> None:
        self.key, self.access, self.value, self.op, self.attrs = key, access, value, op, attrs


def _key(e: Effect) -> tuple[int, int, int]:
    return e.key


class Hbm:
    """The case's HBM tensors by address (one shared address space, ADR-0010)."""

    def __init__(self, tensors: Mapping[str, tuple[int, int, np.dtype, Any]]) -> None:
        """``tensors``: name -> (address, elements, storage dtype, maker of the initial
        contents)."""
        states = sorted((TensorState(n, a, k, st, mk) for n, (a, k, st, mk) in tensors.items()),
                        key=lambda t: t.addr)
        self.tensors = states
        self._addrs = [t.addr for t in states]

    def at(self, addr: int) -> TensorState:
        """The tensor holding byte ``addr`` (the recorder checked every access is inside
        one)."""
        i = bisect_right(self._addrs, addr) - 1
        t = self.tensors[max(i, 0)]
        assert t.addr <= addr < t.addr + t.numel * t.itemsize, f"hbm {addr} in no tensor"
        return t

    def materialised(self) -> int:
        """Bytes of initial contents made so far."""
        return sum(t.initial_array.nbytes for t in self.tensors if t.initial_array is not None)
