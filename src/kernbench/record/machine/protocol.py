"""What the code around the PE machine sees of it: one structural protocol.

The timing registry, the kernel context, the front end, composite GEMMs (``composite.py``),
IPCQ (``ipcq.py``), software pipelining (``pipeline.py``), the async issue policy
(``asynchronous.py``) and the resident-program scheduler (``resident.py``) are written
against ``PE``; ``record/machine/pe.py``'s ``PEDriver`` satisfies it. So nothing around the
machine imports it (docs/adr/0004-layered-record.md), at run time or behind
``TYPE_CHECKING``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from kernbench.record.machine.allocator import FreeListAllocator, ScratchAllocator
from kernbench.record.machine.engines import DmaChannel, GemmEngine, LinkEngine, MathEngine
from kernbench.record.rows.writer import OpWriter
from kernbench.trace.hw import HwConfig


class PE(Protocol):
    index: int
    writer: OpWriter  # the recording's op log (rows, access.parquet, the version flags)
    seq: int  # ops this PE has logged
    hw: HwConfig
    env: Any  # the recording's SimPy environment
    #: the running program's clock (ps); ahead of SimPy's for commands in closed form
    now: int
    dispatch_ps: int
    scratch: ScratchAllocator | FreeListAllocator
    #: recv_async buffers whose message has not matched yet (shared, mutated in place)
    unresolved: list
    #: buffers with a completion in the future (lazy loads, sends reading their source)
    pending: list
    dma_rd: DmaChannel
    dma_wr: DmaChannel
    gemm: GemmEngine
    math: MathEngine
    links: dict[str, LinkEngine]
    ring: Any  # the IPCQ ring of active PEs (ipcq.Ring), None in occupancy's dry run
    ctx: Any  # the running program's KernelContext
    loop: Any  # the innermost running pipelined loop (pipeline.Loop)
    rewound_ps: int  # when a scope last rewound scratch (no load is hoisted above it)
    by_op: dict  # op -> (timing model, engine, handler): what ``KernelContext.emit`` runs
    pipelinable: frozenset  # the loads a pipelined loop times
    # the async policy's machine state (machine/asynchronous.py, machine/scoreboard.py)
    board: Any
    queues: dict[Any, deque[int]]  # engine -> the starts of its queued ops
    queue_depth: int  # the capacity of each of those queues (``hw.engine_queue_depth``)
    last_end: int
    switch_at: int
    stalled_on: deque[int] | None  # the engine queue the program handing over waits on
    peak: int
    blocked_at: Any
    done: bool
    carried_wait: int  # explicit-wait stalls charged to the next op (the scheduler saves it)
    shadow: Any  # the value graph of a recording with guards (record/guards), else None

    def issue(self, msg: Any) -> Any: ...
    def timed(self, cmd: Any, model: Any, engine: Any) -> None: ...
    def row(self, t_issue: int, start: int, t_end: int, busy: int, wait: int,
            cmd: Any) -> None: ...
    def record(self, cmd: Any, t_issue: int, start: int, t_end: int, busy: int, wait: int,
               parent: int | None = None) -> int: ...
    def take_wait(self) -> int: ...
    def stall(self, until: int) -> None: ...
    def drain(self) -> None: ...
    def set_loop(self, loop: Any) -> None: ...
    def adopt(self, cmd: Any) -> None: ...
    def maybe_yield(self) -> None: ...
    def data_ready(self, cmd: Any) -> int: ...
    def note_access(self, cmd: Any, t_end: int) -> None: ...
