"""Valid maps and memories that allocate nothing up front: HBM's valid map (``AllValid``:
never checked), and the memories made page by page as they are touched, the message slots of
PEs that receive messages by PE index (docs/adr/0750).

Such a PE's ``ipcq`` space spans a region per source PE, up to ``(2 + n_pe) * ipcq_depth``
slots of ``ipcq_slot_kib`` (528 MiB at 64 PEs and 4 MiB slots), while its messages touch a
few KiB of each slot. Its bytes and its valid map are private anonymous mappings: the kernel
makes a zero page only where a message is written or a read checked, so what replay holds is
what the messages use, not what the layout spans. (``np.zeros`` would also defer the pages,
but madvises large arrays into 2 MiB huge pages; a ``bytearray`` writes every byte.)
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from typing_extensions import Buffer

_FLAGS = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)


class LazyBytes(mmap.mmap):
    """A zero-filled byte map whose pages are made on first touch, with ``bytearray``'s
    ``find`` of one byte value (what the valid-map checks call)."""

    def find(self, sub: int | Buffer, start: int = 0, stop: int | None = None, /) -> int:
        return super().find(bytes((sub,)) if isinstance(sub, int) else sub, start,
                            len(self) if stop is None else stop)


def _lazy(size: int) -> LazyBytes:
    return LazyBytes(-1, max(size, 1), flags=_FLAGS) if _FLAGS else LazyBytes(-1, max(size, 1))


def lazy_memory(size: int) -> tuple[np.ndarray, LazyBytes]:
    """The bytes (a writable uint8 array) and the valid map (all invalid) of a memory of
    ``size`` bytes, neither of them made until touched."""
    return np.frombuffer(_lazy(size), np.uint8)[:size], _lazy(size)


class AllValid:
    """The valid map of a space whose reads are never checked (HBM): every byte is valid,
    marks are ignored, and no per-byte map is allocated."""

    __slots__ = ()

    def __setitem__(self, key: slice, value: object) -> None:
        pass

    def __getitem__(self, key: slice) -> bytes:
        return b"\x01" * len(range(*key.indices(1 << 62)))

    def find(self, byte: int, lo: int = 0, hi: int | None = None) -> int:
        return -1 if byte == 0 else lo
