"""What the chip's programs and requests see of the event loop (``loop.Chip``): one
structural protocol, so that ``program.py`` and ``ipcq.py`` never import the loop that
imports them (docs/layout.md, "No import cycle")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kernbench.record.machine.chip.board import Board
from kernbench.record.machine.chip.engines import ChipEngine
from kernbench.record.machine.chip.node import Node
from kernbench.record.rows.shared import SharedWriter
from kernbench.record.rows.writer import OpWriter
from kernbench.trace.hw import HwConfig


class ChipLoop(Protocol):
    hw: HwConfig
    writer: OpWriter
    board: Board
    parts: Any
    time: int  # the time of the decision being made
    switch_at: int  # the running program hands over once its clock reaches this
    note_issue_wait: int  # the issue port's stall of the op being entered
    alone: bool  # the occupancy dry run (program 0 by itself)
    requests: dict[type, Callable[[Any, Any], Any]]
    shared: SharedWriter  # each op's waits on the shared parts (shared.parquet)

    def enter(self, node: Node, prog: Any) -> None: ...
    def claim(self, node: Node) -> None: ...
    def on_ready(self, node: Node) -> None: ...
    def poke(self, e: ChipEngine) -> None: ...
    def due(self, e: ChipEngine, t: int) -> None: ...
    def at(self, t: int, fn: Callable[[int], None]) -> None: ...
    def settle(self, node: Node, start: int, end: int | None = None, busy: int = 0) -> None: ...
    def catch_up(self, t: int) -> None: ...
    def maybe_yield(self, prog: Any) -> None: ...
    def park(self, prog: Any) -> None: ...
    def wake(self, prog: Any, t: int) -> None: ...
    def wait_for(self, prog: Any, nodes: list[Node]) -> None: ...
