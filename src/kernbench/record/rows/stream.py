"""Writes ``stream.parquet``: what a program asked of the machine besides its op rows.

The op log holds every op a program issued; ``retime`` issues them again on
other hardware and needs the rest of what the kernel told the machine, in order: where its
values were allocated and freed, its explicit waits, its posted receives and their
resolutions, the access arrays it interned, its pipelined loops and lifetime scopes, the
hardware fields it read, and the work a row's cost model reads where the row does not say
it. Each event is noted with its program and its PE's row count (``seq``) at that moment:
it happened before the program's next row. The file is written whatever the hardware (an
empty one says "nothing but rows"), in batches, so memory does not grow with the op count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from greenlet import getcurrent

from kernbench.record.commands import RecvAsync, Resolve, Send, Wait
from kernbench.record.rows.columns import CODE, POOL, array
from kernbench.schemas.arrow import STREAM, STREAM_KINDS
from kernbench.schemas.ops import OPS, Cost, Op
from kernbench.trace import writing

#: events held before a batch is written
BATCH_EVENTS = 1 << 16
(ALLOC, RELEASE, WAIT, RESOLVE, RECV_ASYNC, SEND, ACCESS, LOOP, NEXT, END, LIFETIME,
 LIFETIME_END, AUTO_TILE, HW, WORK) = range(len(STREAM_KINDS))
_KIND_DICT = pa.array(list(STREAM_KINDS), pa.string())
#: how a peer (``commands.Peer``) is stored: a direction as a negative code, a PE as itself
PEER_CODE = {"next": -1, "prev": -2}
PEER_OF = {v: k for k, v in PEER_CODE.items()}


def peer_code(peer: Any) -> int:
    return PEER_CODE[peer] if isinstance(peer, str) else int(peer)


#: what a row's cost model reads as its work when the row says it (stream.parquet holds the
#: rest, ``WORK``): per op code, 0 its bytes (a transfer), 1 its elements (MATH), 2 never
#: (a GEMM's shape, a composite's tiling: always noted), 3 nothing (an op of no cost)
_BY_BYTES, _BY_ELEMENTS, _NOTED, _UNCOSTED = range(4)
_WORK_RULE = [{Cost.DMA_READ: _BY_BYTES, Cost.DMA_WRITE: _BY_BYTES, Cost.LINK: _BY_BYTES,
               Cost.MATH: _BY_ELEMENTS, Cost.TRANSCENDENTAL: _BY_ELEMENTS,
               Cost.SOFTMAX: _BY_ELEMENTS, Cost.GEMM: _NOTED}.get(OPS[op].cost,
                                                               _UNCOSTED)
              for op in CODE]
_WORK_RULE[CODE[Op.GEMM]] = _NOTED  # a composite's (M, N, K, trans_b, tile rows)


def unusual_work(cmds: list[Any], first: int) -> list[tuple[int, tuple[int, ...]]]:
    """(row, work) of the commands whose work is not what their row says (``_WORK_RULE``);
    ``first`` is the first command's row in its batch."""
    rule, code = _WORK_RULE, CODE
    out = []
    for i, cmd in enumerate(cmds):
        how = rule[code[cmd[0]]]
        if how == _UNCOSTED:
            continue
        w = cmd[5]
        if how == _NOTED or len(w) != 1 or w[0] != (cmd[4] if how == _BY_BYTES else cmd[3]):
            out.append((first + i, w))
    return out


class StreamWriter:
    """The events of one recording, written to ``stream.parquet`` in batches."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: the events not written yet: (program, seq, kind, args, src)
        self.rows: list[tuple[int, int, int, Sequence[int], str | None]] = []
        self._pq: Any = None
        self.hw: Any = None  # the recording's ``HwReads`` (``hw_view``)

    def note(self, program: int, seq: int, kind: int, args: Sequence[int] = (),
             src: str | None = None) -> None:
        rows = self.rows
        rows.append((program, seq, kind, args, src))
        if len(rows) >= BATCH_EVENTS:
            self.flush()

    def note_here(self, kind: int, args: Sequence[int] = (), src: str | None = None) -> None:
        """An event of the program running now (its greenlet's context)."""
        ctx = getattr(getcurrent(), "ctx", None)
        if ctx is not None:
            self.note(ctx.program, ctx.driver.seq, kind, args, src)

    def hw_view(self, hw: Any) -> Any:
        """What a program sees as its hardware: ``hw`` whose first read of each field is
        noted (``HW``), so ``retime`` knows which fields the op stream may depend on."""
        if self.hw is None or self.hw.hw is not hw:
            self.hw = HwReads(hw, self)
        return self.hw

    def flush(self) -> None:
        if self._pq is None:
            self._pq = writing.open_writer(self.path, STREAM, "stream")
        n = len(self.rows)
        if not n:
            return
        program, seq, kind, args, src = zip(*self.rows, strict=True)
        self.rows = []
        lens = np.fromiter(map(len, args), np.int32, n)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(lens, out=offsets[1:])
        flat = np.fromiter(chain.from_iterable(args), np.int64, int(offsets[-1]))
        code = {v: i for i, v in enumerate(dict.fromkeys(v for v in src if v is not None))}
        missing = np.array([v is None for v in src], np.bool_)
        idx = np.fromiter((0 if v is None else code[v] for v in src), np.int32, n)
        batch = pa.RecordBatch.from_arrays([
            array(np.array(program, np.int32)), array(np.array(seq, np.int64)),
            pa.DictionaryArray.from_arrays(array(np.array(kind, np.int32)), _KIND_DICT),
            pa.ListArray.from_arrays(array(offsets), array(flat), pool=POOL),
            pa.DictionaryArray.from_arrays(array(idx, mask=missing if missing.any() else None),
                                           pa.array(list(code), pa.string()))], schema=STREAM)
        self._pq.write_batch(batch)

    def close(self) -> None:
        self.flush()
        self._pq.close()
        self._pq = None

    def abort(self) -> None:
        self.rows = []
        writing.discard(self._pq)
        self._pq = None


class HwReads:
    """A recording's hardware as its programs read it: each field's first read is an
    ``HW`` event of the reading program (then cached here, read at attribute speed)."""

    def __init__(self, hw: Any, stream: StreamWriter) -> None:
        self.hw, self.stream = hw, stream

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.hw, name)
        if not name.startswith("_"):
            self.stream.note_here(HW, (), name)
        setattr(self, name, value)
        return value


class ProgramTape:
    """One program's events, noted at its PE's row count (``driver.seq``)."""

    __slots__ = ("stream", "ctx", "loops")

    def __init__(self, stream: StreamWriter, ctx: Any) -> None:
        self.stream, self.ctx = stream, ctx
        self.loops = 0  # pipelined loops begun: the next one's number

    def note(self, kind: int, args: Sequence[int] = (), src: str | None = None) -> None:
        ctx = self.ctx
        self.stream.note(ctx.program, ctx.driver.seq, kind, args, src)

    def alloc(self, addr: int, nbytes: int, src: str) -> None:
        ctx = self.ctx
        rows = self.stream.rows
        rows.append((ctx.program, ctx.driver.seq, ALLOC, (addr, nbytes), src))
        if len(rows) >= BATCH_EVENTS:
            self.stream.flush()

    def release(self, addr: int) -> None:
        self.note(RELEASE, (addr,))

    def wrap(self, issue: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``issue`` (a driver's requests) noting the requests that are not rows."""
        kinds = _REQUESTS

        def noted(msg: Any) -> Any:
            how = kinds.get(type(msg))
            if how is not None:
                how(self, msg)
            return issue(msg)

        return noted


def _wait(tape: ProgramTape, msg: Any) -> None:
    tape.note(WAIT, [b.addr for b in msg.bufs])


def _resolve(tape: ProgramTape, msg: Any) -> None:
    tape.note(RESOLVE, [b.addr for b in msg.bufs])


def _recv_async(tape: ProgramTape, msg: Any) -> None:
    tape.note(RECV_ASYNC, (msg.out.buf.addr, peer_code(msg.direction)), msg.src)


def _send(tape: ProgramTape, msg: Any) -> None:
    tape.note(SEND, (peer_code(msg.direction),))


#: the requests that are noted (a blocking ``Recv`` is its row, ``Sync`` the machine's own)
_REQUESTS: dict[type, Callable[[ProgramTape, Any], None]] = {
    Wait: _wait, Resolve: _resolve, RecvAsync: _recv_async, Send: _send}
