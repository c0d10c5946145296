"""A case's tensors whose output roles are the arrays its kernel stores to.

A front end that finds a launch's outputs by watching its stores (``kbt.case`` with
``outputs=None``) hands the case this mapping instead of a dict. The recording that runs the
kernel anyway settles the roles from the stores it saw (``begin`` before its first program,
``settle`` after its last); looking a tensor up before that settles them with the front end's
own dry recording. Either way a tensor's role is what the kernel's stores make it, and the
names, order, shapes and dtypes are known from the start (``provisional``: every role
``input``), which is all the HBM layout needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from kernbench.case.tensors import TensorSpec


class StoredRoles(Mapping[str, TensorSpec]):
    """``provisional`` with ``role="inout"`` on every tensor the kernel stores to. ``dry``
    gives those names by a recording of its own; ``watch`` starts watching the stores of the
    recording about to run, and ``seen`` gives the names that recording stored to."""

    def __init__(self, provisional: Mapping[str, TensorSpec], dry: Callable[[], frozenset[str]],
                 watch: Callable[[], None], seen: Callable[[], frozenset[str]]) -> None:
        self.provisional = dict(provisional)
        self._dry, self._watch, self._seen = dry, watch, seen
        self._settled: dict[str, TensorSpec] | None = None

    def begin(self) -> None:
        """A recording of the case is about to run its programs."""
        if self._settled is None:
            self._watch()

    def settle(self) -> None:
        """That recording ran every program: the roles are the stores it saw."""
        if self._settled is None:
            self._settled = self._roles(self._seen())

    def _roles(self, stored: frozenset[str]) -> dict[str, TensorSpec]:
        return {n: replace(s, role="inout") if n in stored else s
                for n, s in self.provisional.items()}

    def __getitem__(self, name: str) -> TensorSpec:
        if self._settled is None:
            self._settled = self._roles(self._dry())
        return self._settled[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.provisional)

    def __len__(self) -> int:
        return len(self.provisional)

    def __contains__(self, name: object) -> bool:
        return name in self.provisional


def layout_specs(tensors: Mapping[str, TensorSpec]) -> Mapping[str, TensorSpec]:
    """The specs an HBM layout reads (names, order, shapes, dtypes), settling no role."""
    return tensors.provisional if isinstance(tensors, StoredRoles) else tensors
