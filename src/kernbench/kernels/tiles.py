"""The tile schedules of the attention kernels, and the persistent prefetch buffers they load
into: plain Python over the tile grid (no ops), plus one helper that issues ``tl.load``s.

A causal prefill visits, for each query tile, only the KV tiles that hold at least one key at
or before the tile's last query position (``causal_steps``); the KV tiles after it are fully
masked and never loaded nor computed. Of the visited tiles only those reaching past the
tile's *first* position need the mask (``needs_mask``). Tiles at the end of the sequence may
be shorter than the tile size (S need not be a multiple of it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, groupby
from typing import Any, TypeVar

from kernbench import tl

T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """One (query tile, KV tile) pair of a causal sweep: rows ``[q0, q0 + tq)`` against keys
    ``[k0, k0 + tkv)``; ``first``/``last``: the first/last KV tile of its query tile."""

    q0: int
    tq: int
    k0: int
    tkv: int
    first: bool
    last: bool

    @property
    def needs_mask(self) -> bool:
        """Some key of the tile lies after some query row of it (a diagonal tile)."""
        return self.k0 + self.tkv - 1 > self.q0


def causal_steps(s: int, t_q: int, t_kv: int) -> Iterator[Step]:
    """Every (query tile, KV tile) pair of a causal sweep over ``s`` positions that is not
    fully masked, query tile by query tile, KV tiles in order."""
    for q0 in range(0, s, t_q):
        tq = min(t_q, s - q0)
        starts = range(0, q0 + tq, t_kv)  # KV tiles with a key at or before q0 + tq - 1
        for k0 in starts:
            yield Step(q0, tq, k0, min(t_kv, s - k0), k0 == 0, k0 == starts[-1])


def by_query_tile(steps: Iterable[Step]) -> Iterator[tuple[int, Iterator[Step]]]:
    """``(q0, its steps)`` per query tile of a causal sweep, lazily (``itertools.groupby``)."""
    return groupby(steps, key=lambda st: st.q0)


def started(gen: Iterator[T]) -> Iterator[T]:
    """``gen`` advanced to its first item now (a load generator issues its first loads
    here), then iterated as if it had not been."""
    first = next(gen)
    return chain([first], gen)


class Prefetch:
    """Persistent load buffers, two per (role, shape), used round-robin: the load of the next
    tile of a role goes into the buffer the tile before the current one used, so it can be
    in flight while the current tile is computed. Allocate (``reserve``) outside every
    scratch scope; load from anywhere."""

    def __init__(self) -> None:
        self._slots: dict[tuple[str, tuple[int, ...]], list[Any]] = {}
        self._turn: dict[tuple[str, tuple[int, ...]], int] = {}

    def reserve(self, role: str, shape: tuple[int, ...], dtype: Any = None,
                ways: int = 2) -> None:
        key = (role, shape)
        if key not in self._slots:
            dtype = tl.bfloat16 if dtype is None else dtype
            self._slots[key] = [tl.zeros(shape, dtype) for _ in range(ways)]
            self._turn[key] = 0

    def take(self, role: str, shape: tuple[int, ...]) -> Any:
        """The next buffer of ``role`` and ``shape`` (the one used ``ways`` takes ago)."""
        key = (role, shape)
        turn = self._turn[key]
        self._turn[key] = turn + 1
        slots = self._slots[key]
        return slots[turn % len(slots)]

    def load(self, role: str, ptr: Any, shape: tuple[int, ...]) -> Any:
        """Issue the load of ``shape`` bf16 at ``ptr`` into the next buffer of its role."""
        return tl.load(ptr, shape, tl.bfloat16, out=self.take(role, shape))
