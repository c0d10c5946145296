"""Whose turn it is on the chip: the programs' greenlets and the decisions due, taken in
one global time order (docs/adr/0735, docs/adr/0736).

Two heaps drive it: the programs that can run, by ``(clock, program)``, and the decisions
due, by time. A program runs first when its clock is no later than the next decision (an
op issued at ``t`` takes part in the decisions at ``t``) and hands over once its clock
passes the next program's or decision's. Programs hand over to each other directly: the
one that yields or parks takes the loop's turn on its own greenlet (makes the decisions due
first) and switches to the program due, one greenlet switch per hand-over. A program's
greenlet starts from the main greenlet (started from another program's, it would stack on
that one's depth); the main greenlet is back when a program's body returns or nothing can
run.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from kernbench.errors import IpcqError
from kernbench.record.machine.chip.node import NEVER

_IDLE = object()  # what a program hands the main greenlet when nothing can run


class _Start:
    """What a program hands the main greenlet for a program whose greenlet has not run."""

    __slots__ = ("prog",)

    def __init__(self, prog: Any) -> None:
        self.prog = prog


class Turns:
    """The turn-taking of the chip's loop (``loop.Chip`` builds the heaps and programs)."""

    runnable: list[tuple[int, int, Any]]  # programs that can run, by (clock, program)
    events: list[tuple[int, int, Callable[[Any, int], None], Any]]  # decisions, by time
    time: int  # the time of the decision being made
    main: Any  # the main greenlet
    running: Any  # the program running (None: the loop's own turn)
    switch_at: int  # the running program hands over once its clock reaches this
    live: int  # programs started and not finished
    parked: dict[int, tuple[int, str, str | None]]  # program -> (PE, in what, where)
    pes: list[Any]  # the chip's PEs (their programs still waiting for a slot)

    def _finish(self, prog: Any) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        """The main greenlet's loop, to the end of the recording."""
        runnable, events = self.runnable, self.events
        while runnable or events:
            if runnable and (not events or runnable[0][0] <= events[0][0]):
                self._resume(heapq.heappop(runnable)[2])
            else:
                t, _, fn, arg = heapq.heappop(events)
                self.time = t
                fn(arg, t)
        if self.live:
            raise self._deadlock()

    def _deadlock(self) -> IpcqError:
        """What each parked program waits in, and where (as the PE machine says it)."""
        stuck = sorted(self.parked.items())
        where = "; ".join(f"program {p} on PE {pe} in {what}" + (f" at {src}" if src else "")
                          for p, (pe, what, src) in stuck)
        later = sum(len(pe.waiting) for pe in self.pes)
        hint = ("" if not later else
                f"; {later} more programs wait for a slot on PEs whose resident programs are "
                "parked, so a program waiting for one of them never proceeds: launch at most "
                "as many communicating programs as fit (n_pe x max_programs_per_pe), or "
                "record on hardware with more PEs")
        return IpcqError(f"deadlock: no program can make progress ({where}){hint}",
                         stuck[0][1][2] if stuck else None)

    def _arm(self, prog: Any) -> None:
        """``prog`` runs next, until its clock passes the next program's or decision's."""
        sa = NEVER
        if self.runnable:
            c, p, _ = self.runnable[0]
            sa = c + (1 if prog.program < p else 0)
        if self.events and self.events[0][0] + 1 < sa:
            sa = self.events[0][0] + 1
        self.switch_at = sa
        self.running = prog

    def _resume(self, prog: Any) -> None:
        """Run ``prog`` from the main greenlet, and every program started on the way."""
        self._arm(prog)
        msg: Any = _Start(prog)
        while type(msg) is _Start:
            g = msg.prog.greenlet
            msg = g.switch() if not g else g.switch(None)
        ended, self.running = self.running, None
        if ended is not None and ended.greenlet.dead:
            ended.issued_all = True
            if not ended.live:
                self._finish(ended)

    def _hand_over(self, prog: Any, again: bool) -> None:
        """The loop's turn, on ``prog``'s greenlet: make the decisions due first, then run
        the program due (return at once if that is ``prog``). ``again``: ``prog`` can run
        again from its clock (else it parks until woken)."""
        runnable, events = self.runnable, self.events
        if again:
            heapq.heappush(runnable, (prog.clock, prog.program, prog))
        self.running = None
        while runnable or events:
            if runnable and (not events or runnable[0][0] <= events[0][0]):
                nxt = heapq.heappop(runnable)[2]
                if nxt is prog:
                    self._arm(prog)
                else:
                    self._switch_to(nxt)
                return  # running again (whoever switched here armed it)
            t, _, fn, arg = heapq.heappop(events)
            self.time = t
            fn(arg, t)
        self.main.switch(_IDLE)  # nothing can run: the main loop ends (a deadlock if live)

    def _switch_to(self, prog: Any) -> None:
        """Run ``prog`` from this program's greenlet; back here at this one's turn."""
        self._arm(prog)
        g = prog.greenlet
        if g:
            g.switch(None)
        else:
            self.main.switch(_Start(prog))

    def catch_up(self, t: int) -> None:
        """Make the decisions due at or before ``t`` now (the running program, whose clock
        is ``t``, finds a full queue: the ops that start by then have left it)."""
        events = self.events
        while events and events[0][0] <= t:
            when, _, fn, arg = heapq.heappop(events)
            self.time = when
            fn(arg, when)

    def maybe_yield(self, prog: Any) -> None:
        """Hand over once this program's clock passes the next program's or decision's.
        Decisions due before its clock are made right here, on its greenlet, while no other
        program is due first (the same order as handing over)."""
        if prog.clock < self.switch_at:
            return
        clock, events, runnable = prog.clock, self.events, self.runnable
        while events and events[0][0] < clock and (
                not runnable or events[0][0] < runnable[0][0]):
            t, _, fn, arg = heapq.heappop(events)
            self.time = t
            fn(arg, t)
        sa = NEVER
        if runnable:
            c, p, _ = runnable[0]
            sa = c + (1 if prog.program < p else 0)
        if events and events[0][0] + 1 < sa:
            sa = events[0][0] + 1
        self.switch_at = sa
        if clock >= sa:  # the program due is another one, before this one: it goes first
            self._switch_to(heapq.heapreplace(runnable, (clock, prog.program, prog))[2])

    def park(self, prog: Any, what: str = "a wait", src: str | None = None) -> None:
        """Stop this program until something ``wake``s it (registered before); ``what`` and
        ``src`` say what it waits in, should nothing ever wake it (a deadlock)."""
        self.parked[prog.program] = (prog.pe, what, src)
        self._hand_over(prog, False)
        del self.parked[prog.program]

    def wake(self, prog: Any, t: int) -> None:
        prog.stall_to(t)
        heapq.heappush(self.runnable, (prog.clock, prog.program, prog))
        run = self.running
        if run is not None:
            sa = prog.clock + (1 if run.program < prog.program else 0)
            if sa < self.switch_at:
                self.switch_at = sa
