"""Record-time bounds: no launch records more than ``KERNBENCH_MAX_OPS`` ops (ADR-0546)
nor runs more than ``KERNBENCH_MAX_PROGRAMS`` programs (ADR-0861).

A recording is refused, as one line, as early as its size can be known:

1. **the grid**: a launch of more programs than ``KERNBENCH_MAX_PROGRAMS`` (every program
   runs the kernel's Python body, even one that records nothing), or than the op bound
   (every program is counted as at least one op), is refused before any program runs;
2. **a loop nest** of the Triton front end: entering a loop whose trip count, times the trip
   counts of the loops around it, times the grid's programs, exceeds the bound is refused at
   the loop's line (every iteration is counted as at least one op: a loop of a billion
   iterations is refused whether or not its body records anything);
3. **a projection from the first program**: when the first program to finish has recorded
   ``k`` ops, ``k`` times the grid's programs over the bound is refused (programs usually
   record about as many ops as the first; a launch whose later programs do more is caught
   by the next point);
4. **the running count**: otherwise recording stops once the op log holds more than the
   bound (checked at every written batch of rows, so within ``record.writer.BATCH_ROWS``
   ops of it).

The bounds come from ``KERNBENCH_MAX_OPS`` and ``KERNBENCH_MAX_PROGRAMS`` (positive
integers; defaults ``DEFAULT_MAX_OPS`` and ``DEFAULT_MAX_PROGRAMS``), each read once per
value of its variable. A launch reports its finished programs every ``PROGRAM_TICK``
programs (``OpBound.on_programs``): programs that record little still show progress.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

from kernbench.errors import BadInputError, RecordLimitError
from kernbench.record.machine.context import current

__all__ = ["MAX_OPS_ENV", "DEFAULT_MAX_OPS", "MAX_PROGRAMS_ENV", "DEFAULT_MAX_PROGRAMS",
           "PROGRAM_TICK", "max_ops", "max_programs", "check_grid", "loop", "counted",
           "OpBound"]

MAX_OPS_ENV = "KERNBENCH_MAX_OPS"
#: 20 million ops: about a minute of recording, a few hundred MB of op log; the largest
#: built-in workload (gqa-prefill S=8192) records 3 million
DEFAULT_MAX_OPS = 20_000_000
_HINT = f"set {MAX_OPS_ENV} to raise the bound"
MAX_PROGRAMS_ENV = "KERNBENCH_MAX_PROGRAMS"
#: a million programs: a program costs 0.1 ms of recording when it records nothing (an
#: early return), 0.6 ms as the README's add with every lane masked off, so the bound is
#: one to ten minutes of recording, shown as progress (ADR-0861); the built-in and Triton
#: bench workloads launch at most a few thousand
DEFAULT_MAX_PROGRAMS = 1_000_000
#: finished programs between two reports to ``OpBound.on_programs``
PROGRAM_TICK = 1024


def max_ops() -> int:
    """The op bound, from ``KERNBENCH_MAX_OPS`` (BadInputError when it is not a positive
    integer)."""
    return _parse(MAX_OPS_ENV, os.environ.get(MAX_OPS_ENV), DEFAULT_MAX_OPS, "ops")


def max_programs() -> int:
    """The program bound, from ``KERNBENCH_MAX_PROGRAMS`` (BadInputError when it is not a
    positive integer)."""
    return _parse(MAX_PROGRAMS_ENV, os.environ.get(MAX_PROGRAMS_ENV), DEFAULT_MAX_PROGRAMS,
                  "programs")


@functools.lru_cache(maxsize=16)
def _parse(name: str, raw: str | None, default: int, unit: str) -> int:
    if raw is None or not raw.strip():
        return default
    try:
        n = int(raw.strip().replace("_", ""))
    except ValueError:
        n = 0
    if n <= 0:
        raise BadInputError(f"{name}={raw!r} is not a positive integer number of {unit}")
    return n


def _bound() -> str:
    return f"{MAX_OPS_ENV}={max_ops():,}"


def check_grid(grid: tuple[int, ...]) -> int:
    """The grid's program count; RecordLimitError when it alone exceeds a bound."""
    n = math.prod(grid)
    limit = max_programs()
    if n > limit:
        raise RecordLimitError(f"launch refused: the grid {list(grid)} has {n:,} programs, "
                               f"more than {MAX_PROGRAMS_ENV}={limit:,} allows (each program "
                               "runs the kernel's body while recording, even one that records "
                               f"nothing); set {MAX_PROGRAMS_ENV} to raise the bound")
    if n > max_ops():
        raise RecordLimitError(f"launch refused: the grid {list(grid)} has {n:,} programs, "
                               f"more than {_bound()} ops allow; {_HINT}")
    return n


#: the trip-count products of the running loop nests, per program (id of its context)
_NESTS: dict[int, list[int]] = {}


def loop(it: range, src: str) -> Iterator[int]:
    """``it`` as a loop of the running program, refused (RecordLimitError at ``src``) when
    its iterations, times those of the loops around it, times the grid's programs exceed
    the bound."""
    ctx = current()
    key = id(ctx)
    nest = _NESTS.get(key)
    trips = len(it) * (nest[-1] if nest else 1)
    programs = math.prod(ctx.grid)
    if trips * programs > max_ops():
        around = "" if not nest else f" inside loops of {nest[-1]:,} iterations"
        raise RecordLimitError(
            f"launch refused: a loop of {len(it):,} iterations{around} in each of "
            f"{programs:,} program{'s' * (programs != 1)} is {trips * programs:,} "
            f"iterations, more than {_bound()} ops allow (an iteration counts as at least "
            f"one op); {_HINT}", src)
    return _nested(it, key, trips)


def _nested(it: range, key: int, trips: int) -> Iterator[int]:
    stack = _NESTS.setdefault(key, [])
    stack.append(trips)
    try:
        yield from it
    finally:
        stack.pop()
        if not stack and _NESTS.get(key) is stack:  # not a later program's (same id)
            del _NESTS[key]


class OpBound:
    """Points 3 and 4 of the module doc for one launch of ``programs`` programs (point 3
    only with ``project``: when a PE runs one program at a time, so that its ``seq`` counts
    that program's ops alone). Once the
    bound refuses, every PE stops at its next program or written batch with the same error
    (SimPy reports a failed PE only after the others have run)."""

    __slots__ = ("programs", "limit", "projected", "inner", "error", "finished",
                 "on_programs")

    def __init__(self, programs: int, inner: Callable[[int], Any] | None,
                 project: bool = True,
                 on_programs: Callable[[int, int], Any] | None = None) -> None:
        self.programs, self.limit, self.projected = programs, max_ops(), not project
        self.inner = inner
        self.error: RecordLimitError | None = None
        #: programs finished so far; ``on_programs(finished, programs)`` every PROGRAM_TICK
        self.finished, self.on_programs = 0, on_programs

    def _refuse(self, message: str) -> None:
        self.error = RecordLimitError(f"{message}, more than {MAX_OPS_ENV}={self.limit:,} "
                                      f"allows; {_HINT}")
        raise self.error

    def program_done(self, ops: int) -> None:
        """A program finished having recorded ``ops`` ops (the first one projects)."""
        if self.projected:
            return
        self.projected = True
        if ops * self.programs > self.limit:
            n = self.programs
            self._refuse(f"launch refused: its first program recorded {ops:,} ops, so its "
                         f"{n:,} program{'s' * (n != 1)} project{'s' * (n == 1)} to "
                         f"{ops * n:,} ops")

    def progress(self, n_ops: int) -> None:
        """The op log holds ``n_ops`` rows (the writer's progress hook)."""
        if self.error is not None:
            raise self.error
        if n_ops > self.limit:
            self._refuse(f"recording stopped: {n_ops:,} ops recorded")
        if self.inner is not None:
            self.inner(n_ops)


def counted(run: Callable[[], Any], bound: OpBound) -> Callable[[], Any]:
    """``run`` (one program's body) reporting its op count to ``bound`` when it returns;
    refused at once when the bound has already refused."""

    def body() -> None:
        if bound.error is not None:
            raise bound.error
        ctx = current()
        driver, key = ctx.driver, id(ctx)
        start = driver.seq
        _NESTS.pop(key, None)  # no loop nest outlives its program (a refusal keeps frames)
        try:
            run()
        finally:
            _NESTS.pop(key, None)
        if not bound.projected:
            bound.program_done(driver.seq - start)
        bound.finished += 1
        if bound.on_programs is not None and not bound.finished % PROGRAM_TICK:
            bound.on_programs(bound.finished, bound.programs)

    return body
