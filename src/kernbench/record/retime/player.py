"""Issue one program's recorded op stream on the machine: ``retime``'s kernel body.

The player runs in the program's greenlet where the kernel would, and hands the machine
what the kernel's ``tl`` calls handed it, in the same order (``script.py``): commands
through the op table (``ctx.by_op``), requests through ``ctx.issue``, allocations and frees
through the program's own allocator, scopes, pipelined loops and lifetime mode through the
machine's own helpers. Values are mapped from the addresses the trace recorded to the
buffers this run allocates, so TCM addresses follow the new machine (another slot, another
number of resident programs, another alignment) and every op's timing is the machine's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, cast

from kernbench.errors import RetimeError
from kernbench.record.commands import Cmd, Recv, RecvAsync, Resolve, Send, Wait, new_cmd
from kernbench.record.handle import Buffer, Scope, TensorHandle
from kernbench.record.machine.allocator import close_lifetime, open_lifetime
from kernbench.record.machine.holds import HOLDING, hold_inputs
from kernbench.record.machine.pipeline import advance, begin, finish
from kernbench.record.retime.script import Event, Operand, Row, Script
from kernbench.record.retime.work import Works
from kernbench.record.rows import stream as ev
from kernbench.schemas import dtypes
from kernbench.schemas.guards import BITS, encode, show
from kernbench.schemas.ops import OP

_ENTER, _EXIT, _SEND, _RECV, _GUARD, _GEMM = (OP.SCOPE_ENTER, OP.SCOPE_EXIT, OP.SEND, OP.RECV,
                                              OP.GUARD, OP.GEMM)
_DTYPE = dict(dtypes.DTYPES)
_new = object.__new__
#: an access array an indexed row names in its attrs (canonical JSON: ``"key":N``)
_ACCESS_REF = re.compile(r'"(access|mask|values)":(\d+)')


class Shared:
    """What every program's player reads: the recording's access arrays and how the new
    run renumbers them, and the works its rows' cost models read (``work.py``)."""

    def __init__(self, access: Any, works: Works) -> None:
        self.access = access  # the trace's AccessTable (ids as recorded)
        self.renumber: dict[int, int] = {}  # recorded id -> this run's id
        self._attrs: dict[str, str] = {}
        self.works = works

    def attrs(self, text: str) -> str:
        """``text`` with its access ids renumbered as this run interned them."""
        got = self._attrs.get(text)
        if got is None:
            new = self.renumber

            def swap(m: re.Match[str]) -> str:
                return f'"{m.group(1)}":{new[int(m.group(2))]}'

            got = _ACCESS_REF.sub(swap, text) if '":' in text else text
            if len(self._attrs) > 1 << 14:
                self._attrs.clear()
            self._attrs[text] = got
        return got


def play(ctx: Any, script: Script, shared: Shared) -> None:
    """Issue ``script`` as program ``ctx.program`` (in its greenlet)."""
    Player(ctx, script, shared).run()


class Player:
    __slots__ = ("ctx", "script", "shared", "bufs", "loops", "life", "peer", "auto",
                 "writer", "tape", "works", "by_op", "driver", "seen")

    def __init__(self, ctx: Any, script: Script, shared: Shared) -> None:
        self.ctx, self.script, self.shared = ctx, script, shared
        self.bufs: dict[int, Buffer] = {}  # recorded TCM address -> this run's buffer
        self.seen: dict[Operand, TensorHandle] = {}  # the last handle of each TCM operand
        self.loops: dict[int, Any] = {}  # recorded loop number -> the running loop
        self.life: Any = None  # (free list, bump allocator) while in lifetime mode
        self.peer: Any = None  # the peer of the send about to be issued
        self.auto = False  # the next composite's tiling follows the staging area
        self.writer = ctx.driver.writer
        self.tape = ctx.tape
        self.works = shared.works.of
        self.by_op, self.driver = ctx.by_op, ctx.driver

    def run(self) -> None:
        apply, issue = self.apply, self.issue
        for step in self.script.steps:
            if type(step) is Row:
                issue(step)
            else:
                apply(cast(Event, step))

    # -- values ----------------------------------------------------------------------------
    def handle(self, op: Operand, src: str) -> TensorHandle:
        """The handle of a recorded operand: a TCM one views this run's buffer allocated
        where the trace recorded it, an HBM one a fresh buffer (as the lowering makes)."""
        space = op[0]
        if space == "tcm":
            buf = self.bufs.get(op[2])
            got = self.seen.get(op)
            if got is not None and got.buf is buf:  # the kernel's handle, used again
                return got
            if buf is None:
                raise RetimeError(f"{src}: program {self.ctx.program} uses TCM {op[2]}, which "
                                  "no allocation of its op stream holds")
        elif space == "hbm":
            dt = _DTYPE[op[4]]
            n = 1
            for s in op[3]:
                n *= s
            buf = Buffer("hbm", op[1], op[2], n * dt.itemsize, None, src)
        else:
            raise RetimeError(f"{src}: an op of program {self.ctx.program} names a "
                              f"{space!r} operand, which only the machine makes")
        # ``TensorHandle(buf, ...)`` without its interning: the recorded operand is the
        # handle's own where the buffer sits where it was recorded (the writer needs equal
        # operands, not the same object)
        h = _new(TensorHandle)
        h.buf, h.shape, h.dtype, h.transposed = buf, op[3], _DTYPE[op[4]], op[5]
        h.operand = op if buf.addr == op[2] and buf.pe == op[1] else (
            space, buf.pe, buf.addr, op[3], op[4], op[5])
        if space == "tcm":
            self.seen[op] = h
        return h

    # -- events ----------------------------------------------------------------------------
    def apply(self, e: Event) -> None:
        _EVENTS[e.kind](self, e)

    def _alloc(self, e: Event) -> None:
        ctx = self.ctx
        scopes = ctx.scopes
        addr, nbytes = e.args
        self.bufs[addr] = ctx.scratch.alloc(nbytes, scopes[-1] if scopes else None, e.src)

    def _release(self, e: Event) -> None:
        buf = self.bufs.pop(e.args[0])
        lease = buf.owner
        if lease is not None and lease.arena is not None and not lease.arena.closed:
            lease.arena.release(buf)

    def _wait(self, e: Event) -> None:
        self.ctx.issue(Wait([self.bufs[a] for a in e.args]))

    def _resolve(self, e: Event) -> None:
        self.ctx.issue(Resolve([self.bufs[a] for a in e.args]))

    def _recv_async(self, e: Event) -> None:
        op = e.out
        assert op is not None, "script.py pairs every post with its recv row"
        out = TensorHandle(self.bufs[e.args[0]], op[3], _DTYPE[op[4]])
        self.ctx.issue(RecvAsync(ev.PEER_OF.get(e.args[1], e.args[1]), out, e.src or ""))

    def _send(self, e: Event) -> None:
        self.peer = ev.PEER_OF.get(e.args[0], e.args[0])

    def _access(self, e: Event) -> None:
        shared = self.shared
        old = e.args[0]
        kind = shared.access.rows[old][0]
        arr = shared.access.get(old, kind)
        shared.renumber[old] = self.writer.access.add(kind, arr)

    def _loop(self, e: Event) -> None:
        self.loops[e.args[0]] = begin(self.ctx, e.args[1])

    def _next(self, e: Event) -> None:
        advance(self.ctx, self.loops[e.args[0]])

    def _end(self, e: Event) -> None:
        finish(self.ctx, self.loops.pop(e.args[0]))

    def _lifetime(self, e: Event) -> None:
        self.life = open_lifetime(self.ctx)

    def _lifetime_end(self, e: Event) -> None:
        close_lifetime(self.ctx, *self.life)
        self.life = None

    def _auto_tile(self, e: Event) -> None:
        self.auto = True
        if self.tape is not None:
            self.tape.note(ev.AUTO_TILE)

    def _hw(self, e: Event) -> None:
        if self.tape is not None:
            self.tape.note(ev.HW, (), e.src)

    # -- rows --------------------------------------------------------------------------------
    def issue(self, row: Row) -> None:
        op = row.op
        if op in _ROWS:
            _ROWS[op](self, row)
            return
        src = row.src
        handle = self.handle
        ins = tuple([handle(o, src) for o in row.inputs])
        out = None if row.out is None else handle(row.out, src)
        attrs = row.attrs
        if '":' in attrs:
            attrs = self.shared.attrs(attrs)
        cmd = new_cmd(Cmd, (op, ins, out, row.num, row.nbytes,
                            self.works(self.script, row), src, row.flops, attrs))
        model, engine, handler = self.by_op[op]
        handler(self.driver, cmd, model, engine)
        if op in HOLDING:
            hold_inputs(cmd)

    def _scope_enter(self, row: Row) -> None:
        ctx = self.ctx
        scope = Scope(ctx.scratch.cursor, row.src, len(ctx.scopes) + 1)
        ctx.scopes.append(scope)
        ctx.emit(new_cmd(Cmd, (_ENTER, (), None, 0, 0, (), row.src, 0,
                               f'{{"cursor":{scope.saved}}}')))

    def _scope_exit(self, row: Row) -> None:
        ctx = self.ctx
        scope = ctx.scopes[-1]
        hi = ctx.scratch.cursor
        scope.alive = False
        ctx.scratch.rewind(scope.saved)
        ctx.emit(new_cmd(Cmd, (_EXIT, (), None, 0, 0, (scope.saved, hi), row.src, 0,
                               f'{{"hi":{hi},"lo":{scope.saved}}}')))
        ctx.scopes.pop()

    def _send_row(self, row: Row) -> None:
        self.ctx.issue(Send(self.peer, self.handle(row.inputs[0], row.src), row.src))

    def _recv_row(self, row: Row) -> None:
        attrs = json.loads(row.attrs)
        peer = attrs["dir"] if "dir" in attrs else int(attrs["from"])
        assert row.out is not None, "a recv writes TCM"
        self.ctx.issue(Recv(peer, self.handle(row.out, row.src), row.src))

    def _guard(self, row: Row) -> None:
        ctx = self.ctx
        h = self.handle(row.inputs[0], row.src)
        model, engine, handler = ctx.by_op[_GUARD]
        value = handler(ctx.driver, Cmd(_GUARD, (h,), None, 1, 0, (), row.src), model, engine)
        recorded = json.loads(row.attrs)[BITS]
        if encode(value) != recorded:
            raise RetimeError(
                f"{row.src}: the guard of program {ctx.program} (op {row.op_id}) decided on a "
                f"value that depends on time: recorded {show(recorded, h.dtype.name)}, on "
                f"{ctx.hw.name} it is {show(encode(value), h.dtype.name)}; record the case on "
                "that hardware instead")

    def _composite(self, row: Row) -> None:
        a = self.handle(row.inputs[0], row.src)
        b = self.handle(row.inputs[1], row.src)
        assert row.out is not None, "a composite writes its result"
        out = self.handle(row.out, row.src)
        work = self.shared.works.composite(self.script, row, b.shape, b.dtype.itemsize,
                                           self.auto)
        self.auto = False
        attrs = (row.attrs if work[4] == json.loads(row.attrs)["tile"] else
                 json.dumps({"tile": work[4], "trans_b": bool(work[3])}, sort_keys=True,
                            separators=(",", ":")))
        cmd = Cmd(_GEMM, (a, b), out, row.num, row.nbytes, work, row.src, row.flops, attrs)
        ctx = self.ctx
        model, engine, handler = ctx.by_op[_GEMM]
        handler(ctx.driver, cmd, model, engine)


_EVENTS: list[Callable[[Player, Event], None]] = [
    Player._alloc, Player._release, Player._wait, Player._resolve, Player._recv_async,
    Player._send, Player._access, Player._loop, Player._next, Player._end,
    Player._lifetime, Player._lifetime_end, Player._auto_tile, Player._hw]
_ROWS: dict[Any, Callable[[Player, Row], None]] = {
    _ENTER: Player._scope_enter, _EXIT: Player._scope_exit, _SEND: Player._send_row,
    _RECV: Player._recv_row, _GUARD: Player._guard, _GEMM: Player._composite}
