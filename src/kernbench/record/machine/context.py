"""The current-kernel context: the one piece of state a running kernel greenlet carries."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from greenlet import getcurrent, greenlet

from kernbench.errors import KernelError
from kernbench.record.handle import Scope
from kernbench.record.machine.allocator import FreeListAllocator, ScratchAllocator
from kernbench.record.rows.stream import ProgramTape

if TYPE_CHECKING:
    from kernbench.record.machine.protocol import PE


class KernelContext:
    """What one program of the grid needs while it runs: its PE driver, ids, scratch, scopes."""

    __slots__ = ("driver", "pe", "program", "grid", "pids", "scratch", "scopes", "hw", "issue",
                 "unresolved", "by_op", "tape")

    def __init__(self, driver: PE, program: int, grid: tuple[int, ...]) -> None:
        self.driver = driver
        self.pe = driver.index
        stream = driver.writer.stream
        #: this program's events of the op stream (``record/rows/stream.py``), or None
        self.tape = None if stream is None else ProgramTape(stream, self)
        #: the hardware as the program reads it (each field's first read noted, if taped)
        self.hw = driver.hw if stream is None else stream.hw_view(driver.hw)
        self.program = program
        self.grid = grid
        pids, rest = [], program
        for g in grid:
            pids.append(rest % g)
            rest //= g
        self.pids = tuple(pids)
        self.scratch: ScratchAllocator | FreeListAllocator = driver.scratch
        self.scratch.tape = self.tape
        self.scopes: list[Scope] = []
        #: the driver's list of unmatched recv_async buffers (shared, mutated in place)
        self.unresolved: list = driver.unresolved
        #: hands a command to the PE driver's greenlet and resumes with its answer
        self.issue: Callable[[object], object] = _outside_driver
        #: the driver's op -> (timing model, engine, handler) table: a command runs as
        #: ``handler(driver, cmd, model, engine)``, what ``issue(cmd)`` does, one call shorter
        self.by_op: dict[Any, tuple[Any, Any, Callable[..., Any]]] = _NOT_ATTACHED

    def connect(self, issue: Callable[[object], object], by_op: dict[Any, Any]) -> None:
        """Attach the program to its driver: its requests (noted on the tape, if any) and
        its op table."""
        self.issue = issue if self.tape is None else self.tape.wrap(issue)
        self.by_op = by_op

    def emit(self, cmd: Any) -> None:
        """Hand one command to the PE machine (``lowering.emit`` does this inline)."""
        model, engine, handler = self.by_op[cmd.op]
        handler(self.driver, cmd, model, engine)

    @property
    def scope(self) -> Scope | None:
        return self.scopes[-1] if self.scopes else None


class ProgramGreenlet(greenlet):
    """One grid program; ``ctx`` is how tl calls find their PE."""

    ctx: KernelContext


def current() -> KernelContext:
    """The context of the kernel running now; a KernelError outside a kernel."""
    try:
        return getcurrent().ctx
    except AttributeError:
        raise KernelError("tl calls are only valid inside a kernel being recorded") from None


def _outside_driver(cmd: object) -> object:
    raise KernelError("this kernel context is not attached to a PE driver")


class _NotAttached(dict):
    def __missing__(self, key: object) -> Any:
        return _outside_driver(key)


_NOT_ATTACHED: dict[Any, Any] = _NotAttached()
