"""Scratch without scopes: a value lives in TCM until no front-end value refers to it.

Triton kernels never free anything by hand. The front end runs each program inside
``lifetime_scope()``, which switches the PE's kernel scratch from the bump allocator to a
first-fit free list (``record.allocator.FreeListAllocator``), and reports every value's death
with ``release``. A buffer's bytes go back to the free list when the last value referring to
it dies; they are reused only after every in-flight op touching them has completed (the new
buffer inherits that time as ``read_until``, which its first writer waits for). kernbench's
own ``tl`` kernels never enter lifetime mode: the bump allocator and ``tl.scratch_scope``
stay exactly as they were (ADR-0510).

Reference counting: ``retain(h)`` when a front-end value starts to refer to ``h`` (a fresh
result and a view alike), ``release(h)`` when that value dies. A buffer is freed when its
count drops to zero or below, so a front end that only ever calls ``release`` still frees each
buffer at its first value's death (correct when no view outlives the value it was taken of).
Releasing twice, after the program ended, or a handle the bump allocator made is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kernbench.errors import KernelError
from kernbench.record.handle import TensorHandle
from kernbench.record.machine.allocator import (
    FreeListAllocator,
    ScratchAllocator,
    close_lifetime,
    open_lifetime,
)
from kernbench.record.machine.context import current

__all__ = ["lifetime_scope", "release", "retain", "live_bytes"]


@contextmanager
def lifetime_scope() -> Iterator[FreeListAllocator]:
    """Run the body (one program of a Triton kernel) in lifetime mode.

    Inside it every scratch allocation of this program comes from a free list and is freed
    by ``release``; on exit the program's free list is closed (later releases are ignored)
    and its peak is folded into the PE's scratch peak (``manifest.json`` ``scratch_peak``).
    Bytes the bump allocator already handed out before entry stay reserved below the free
    list. ``tl.scratch_scope`` inside it is a KernelError."""
    ctx = current()
    if type(ctx.scratch) is not ScratchAllocator:
        raise KernelError("lifetime_scope is already active in this program")
    if ctx.scopes:
        raise KernelError("lifetime_scope cannot start inside a tl.scratch_scope",
                          ctx.scopes[-1].src)
    arena, bump = open_lifetime(ctx)
    try:
        yield arena
    finally:
        close_lifetime(ctx, arena, bump)


def retain(h: TensorHandle) -> None:
    """A front-end value now refers to ``h`` (count it; see the module doc)."""
    lease = h.buf.owner
    if lease is not None and lease.arena is not None:
        lease.refs += 1


def release(h: TensorHandle) -> None:
    """A front-end value referring to ``h`` died: free its buffer when no value refers to it.

    Safe to call from a finalizer: never raises for a handle that is already free, from the
    bump allocator, HBM, or from a program whose lifetime scope has ended."""
    buf = h.buf
    lease = buf.owner
    if lease is None:
        return
    arena = lease.arena
    if arena is None or arena.closed:
        return
    lease.refs -= 1
    if lease.refs <= 0:
        arena.release(buf)


def live_bytes(arena: FreeListAllocator) -> int:
    """Bytes held now by live values and pipeline rings (tests and diagnostics)."""
    return sum(b.owner.size for b in arena.live)
