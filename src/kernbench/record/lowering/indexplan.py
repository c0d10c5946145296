"""Index plans of loads and stores at concrete offsets (``record.addressing``): how an
access moves relative to its lowest moved offset (``Plan``), and what is remembered by
identity so a repeated access reads no offset, mask or array again (ADR-0585, ADR-0690).

Only *frozen* arrays (read only, owning their data: the Triton front end's memoised values)
are remembered by identity; each entry keeps its array alive, so an id is never reused while
its entry stands. Every table is cleared whole at ``LIMIT`` entries."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from kernbench.errors import BoundsError
from kernbench.record.handle import HbmTensor
from kernbench.record.memo import BoundedMemo
from kernbench.schemas import elements as ix

#: entries of each table below before it is cleared
LIMIT = 1024


def frozen(a: np.ndarray) -> bool:
    """An array never written again: read only and owning its data."""
    return not a.flags.writeable and a.base is None


def remember(table: BoundedMemo, key: Any, value: Any) -> None:
    """Keep ``value`` in ``table``, bounded by entries alone (``LIMIT``)."""
    table.put(key, value, LIMIT)


#: relative offsets' bytes by (shape, first, last): equal bytes found here are replaced by
#: the object kept, whose hash is computed once (a large tile's hash costs more than its
#: subtraction and comparison together)
_CANON = BoundedMemo()


def canon(rel: np.ndarray, limit: int, max_bytes: int) -> bytes:
    """``rel.tobytes()``, as the object seen before when the bytes are equal."""
    b = rel.tobytes()
    fp = (rel.shape, int(rel.flat[0]), int(rel.flat[-1]))
    got = _CANON.get(fp)
    if type(got) is bytes and got == b:
        return got
    _CANON.keep(fp, b, len(b), limit, max_bytes)
    return b


#: frozen masks known to be bool and not all true, by id: (mask, its frozen C-ordered copy)
MASKS = BoundedMemo()  # id -> (mask, copy)


def _contiguous(shape: tuple[int, ...], strides: list[int]) -> bool:
    want = 1
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n > 1 and s != want:
            return False
        want *= n
    return True


@dataclass(frozen=True)
class Plan:
    """How an access at concrete offsets moves, relative to its lowest moved offset: the
    same for every access whose relative offsets and mask agree (programs 2..P of a launch,
    iterations of a loop advancing a pointer block), computed once (``_PLANS``)."""

    contiguous: bool  # the plain row-major tile, all moved: the row carries no attrs
    strides: list[int] | None  # an affine tile's strides, else None
    base: int  # an affine tile's first relative offset
    stored: np.ndarray | None  # a non-affine tile's relative offsets (masked-off are 0)
    n: int  # elements moved
    work: tuple[int, ...]  # ``ix.dma_work`` of the moved elements


def new_plan(rel: np.ndarray, m: np.ndarray | None, isz: int, burst: int) -> Plan:
    flat = rel.reshape(-1)
    moved = flat if m is None else flat[m.reshape(-1)]
    work = ix.dma_work(moved, isz, burst)
    aff = ix.affine(rel)
    if aff is None:
        stored = rel if m is None else np.where(m, rel, 0)
        stored.flags.writeable = False
        return Plan(False, None, 0, stored, len(moved), work)
    base, strides = aff
    contiguous = m is None and base == 0 and _contiguous(rel.shape, strides)
    return Plan(contiguous, strides, base, None, len(moved), work)


#: ``Known.rel``: ((shape, relative offsets' bytes), lowest, highest offset of all elements)
Rel = tuple[tuple[tuple[int, ...], bytes], int, int]


def fits_int64(lo: int, hi: int) -> bool:
    """Offsets from ``lo`` to ``hi`` are all int64 values: none of them wrapped."""
    return -(1 << 63) <= lo and hi < 1 << 63


class Known(Protocol):
    """What the caller knows of an access's offsets array (a Triton pointer value): ``rel``
    is None or a ``Rel``, the relative offsets measured from the lowest element.
    ``addressing`` fills it in at the first unmasked access; a pointer advanced by a scalar
    carries it over, shifted (ADR-0690)."""

    rel: Rel | None


#: plans of masked accesses at ``Known`` offsets, by (relative-offsets key, id of the
#: frozen mask): (mask, plan, lowest and highest masked-in offsets relative to the lowest
#: of all)
MASKED = BoundedMemo()  # (key, id, itemsize, burst) -> (mask, plan, lo, hi)

def learn(known: Known, m: np.ndarray | None, key: tuple, lo: int, hi: int, plan: Plan
          ) -> None:
    """Tell ``known`` its relative offsets (from an unmasked access: they are the plan
    key's), or remember a masked access's plan by the known relative offsets and mask."""
    if known.rel is None:
        if m is not None:
            return  # every element's extent is not at hand: learnt at an unmasked access
        known.rel = ((key[0], key[1]), lo, hi)
    elif m is not None and frozen(m) and m.any():  # lo, hi: of the masked-in elements
        rkey, all_lo, _ = known.rel
        # the plan's work depends on the itemsize and burst (``key[3:]``): a recording on
        # other hardware in the same process must not take this one's
        remember(MASKED, (rkey, id(m), *key[3:]), (m, plan, lo - all_lo, hi - all_lo))


#: access ids of frozen arrays stored for indexed rows (a plan's offsets, a mask) by id:
#: (array, the access writer by weak reference, id), so a repeated access hashes nothing
_IDS = BoundedMemo()  # id -> (array, writer ref, access id)


def access_id(writer: Any, kind: str, arr: np.ndarray) -> int:
    """``writer.access.add(kind, arr)``, remembered for a frozen ``arr``."""
    acc = writer.access
    if not frozen(arr):
        return int(acc.add(kind, arr))
    got = _IDS.get(id(arr))
    if got is not None and got[0] is arr and got[1]() is acc:
        return got[2]
    n = int(acc.add(kind, arr))
    remember(_IDS, id(arr), (arr, weakref.ref(acc), n))
    return n


def out_of_bounds(t: HbmTensor, offs: np.ndarray, m: np.ndarray | None, sel: np.ndarray,
                  what: str, src: str) -> None:
    """BoundsError naming the first masked-in offset of ``sel`` outside ``t``."""
    bad = (sel < 0) | (sel >= t.numel)
    k = int(np.flatnonzero(bad)[0])
    pos = k if m is None else int(np.flatnonzero(m.reshape(-1))[k])
    at = tuple(int(i) for i in np.unravel_index(pos, offs.shape))
    raise BoundsError(f"{what} of {t.name!r}: offset {int(sel[k])} at tile index "
                      f"{list(at)} is outside tensor {t.name!r} ({t.numel} elements, "
                      f"shape {list(t.shape)})", src)
