"""What a tl call hands the PE driver: a ``Cmd`` (one op in closed form) or a request that
synchronises with other PEs. Plain data: the driver's behaviour lives in pe/ipcq/composite."""

from __future__ import annotations

from typing import Any, NamedTuple

from kernbench.record.handle import Buffer, TensorHandle
from kernbench.schemas.ops import Op


class Cmd(NamedTuple):
    """One op as issued by a kernel (immutable; a NamedTuple because it is built on the
    per-op path, where it is four times cheaper than a frozen dataclass).

    ``work`` is what the engine's closed-form cost reads: ``(elements,)`` for MATH,
    ``(M, N, K)`` for GEMM, ``(nbytes,)`` for DMA and links, ``(lo, hi)`` for a scope exit.
    ``out`` is the written operand: a TCM handle, or for a DMA write an HBM operand.
    """

    op: Op
    inputs: tuple[TensorHandle, ...]
    out: TensorHandle | None
    num_elements: int
    nbytes: int
    work: tuple[int, ...]
    src: str
    flops: int = 0
    attrs: str = "{}"


#: ``new_cmd(Cmd, (op, inputs, out, num_elements, nbytes, work, src, flops, attrs))``: a
#: ``Cmd`` without the NamedTuple's Python-level ``__new__`` (the per-op path; all 9 fields)
new_cmd = tuple.__new__


# -- requests that synchronise with SimPy (run by the PE driver, record/machine/ipcq.py) -----------
#: ring directions a kernel may name; "next" lands in the neighbour's "prev" queue
DIRECTIONS = ("next", "prev")
#: whom a message goes to or comes from: a ring direction, or a PE index
#: (docs/adr/0750): a message sent by index lands in the receiver's queue of its
#: source PE, one sent to a direction in its queue of the opposite direction
Peer = str | int


class Wait:
    """``tl.wait``: stall until these buffers' pending completions have landed."""

    __slots__ = ("bufs",)

    def __init__(self, bufs: list) -> None:
        self.bufs = bufs


class Send:
    """``tl.send(dest, x)``: ``direction`` is a ``Peer`` (a direction or a PE index)."""

    __slots__ = ("direction", "x", "src")

    def __init__(self, direction: Peer, x: TensorHandle, src: str) -> None:
        self.direction, self.x, self.src = direction, x, src


class Recv:
    """``tl.recv`` (blocking), and the pending resolution of a ``tl.recv_async`` handle
    (``event``: the SimPy event its background matcher succeeds with the message)."""

    __slots__ = ("direction", "out", "src", "t_issue", "event")

    def __init__(self, direction: Peer, out: TensorHandle, src: str,
                 t_issue: int | None = None, event: Any = None) -> None:
        self.direction, self.out, self.src = direction, out, src
        self.t_issue, self.event = t_issue, event


class RecvAsync:
    """``tl.recv_async``: start matching in the background; the handle stays pending."""

    __slots__ = ("direction", "out", "src")

    def __init__(self, direction: Peer, out: TensorHandle, src: str) -> None:
        self.direction, self.out, self.src = direction, out, src


class Sync:
    """A guard is about to decide at ``t``: let every other PE's clock reach ``t`` first, so
    every write that could change what the decision reads is recorded (ADR-0840)."""

    __slots__ = ("t",)

    def __init__(self, t: int) -> None:
        self.t = t


class Resolve:
    """Auto-wait on recv_async handles: emit their recv rows once their messages match."""

    __slots__ = ("bufs",)

    def __init__(self, bufs: list[Buffer]) -> None:
        self.bufs = bufs


def tile_rows(stored: tuple[int, int], itemsize: int, stage_bytes: int, tile: int | None) -> int:
    """Rows of a composite's stored ``b`` per streamed tile: ``tile``, else what half the
    staging area holds (the command's ``work`` carries it to the scheduler)."""
    row_bytes = stored[1] * itemsize
    if tile is None:
        tile = max(1, (stage_bytes // 2) // row_bytes)
    return min(tile, stored[0])
