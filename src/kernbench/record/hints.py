"""How to fix it: the hints kernbench adds to a kernel author's errors.

Each function builds a message (or the error itself) from what the failing call already
knows; the call sites in ``semantics``, ``allocator``, ``handle`` and ``case`` are one line.
Hints stay on the message's first line, because the CLI shows only that line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernbench.errors import ScratchOverflowError
from kernbench.record.handle import POINTER_HELP, Pointer

#: how many allocation sites a scratch-overflow message lists
TOP_SITES = 5


def _size(nbytes: int) -> str:
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.1f} MiB"
    if nbytes >= 1 << 10:
        return f"{nbytes / (1 << 10):.1f} KiB"
    return f"{nbytes} B"


def live_sites(live: Sequence[Any]) -> list[tuple[str, int, int]]:
    """(source line, buffers, bytes) of the live scratch allocations, largest total first."""
    sites: dict[str, list[int]] = {}
    for buf in live:
        entry = sites.setdefault(buf.src, [0, 0])
        entry[0] += 1
        entry[1] += buf.nbytes
    return sorted(((s, n, b) for s, (n, b) in sites.items()), key=lambda r: (-r[2], r[0]))


def scratch_overflow(alloc: Any, nbytes: int, cursor: int, src: str) -> ScratchOverflowError:
    """The overflow error, listing the live allocations by source line and size."""
    sites = live_sites(alloc.live)
    shown = "; ".join(f"{s}: {_size(b)} in {n} buffer{'s' if n > 1 else ''}"
                      for s, n, b in sites[:TOP_SITES])
    more = f"; and {len(sites) - TOP_SITES} more lines" if len(sites) > TOP_SITES else ""
    scoped = any(buf.scope is not None for buf in alloc.live)
    fix = ("free a loop's temporaries each iteration with `with tl.scratch_scope():` "
           "around its body, or use smaller tiles" if not scoped else
           "smaller tiles, or a tl.scratch_scope() around the inner loop body")
    live = f"; live allocations: {shown}{more}" if shown else ""
    return ScratchOverflowError(
        f"scratch overflow: requested {nbytes} bytes at cursor {cursor} with budget "
        f"{alloc.budget} bytes (allocation at {src}){alloc.slot_note}{live}; hint: {fix}", src)


def drop_from(live: list[Any], cursor: int) -> None:
    """Forget the allocations at or above ``cursor`` (a rewind); ``live`` is in address
    order because the allocator only bumps."""
    while live and live[-1].addr >= cursor:  # each allocation is dropped once: amortised
        live.pop()  # constant per allocation, and no key function on the scope-exit path


def dot_shapes(a: Sequence[int], b: Sequence[int]) -> str:
    """A ``tl.trans`` suggestion when transposing one operand makes ``a @ b`` fit."""
    if len(a) != 2 or len(b) != 2:
        return "; dot takes 2-D operands (tl.reshape a [1, K] row first)"
    if a[1] == b[1]:
        return f"; did you mean tl.dot(a, tl.trans(b)) ([{a[0]}, {a[1]}] @ [{b[1]}, {b[0]}])?"
    if a[0] == b[0]:
        return f"; did you mean tl.dot(tl.trans(a), b) ([{a[1]}, {a[0]}] @ [{b[0]}, {b[1]}])?"
    if a[0] == b[1]:
        return "; did you mean tl.dot(b, a)?"
    return ""


def operand(v: Any) -> str:
    """Extra words for an op operand that is neither a handle nor a scalar."""
    return f"; {POINTER_HELP}" if isinstance(v, Pointer) else ""
