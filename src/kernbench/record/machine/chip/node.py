"""An op in flight on the chip: issued by a program at its clock, started and ended when
the machine decides it (in global time order)."""

from __future__ import annotations

from typing import Any

#: later than any time a recording reaches
NEVER = 1 << 62


class Node:
    """One op from its issue to its decision. ``deps`` counts the undecided ops it waits for
    (data, or a composite's children); ``ready`` is the latest of its issue and the ends of
    the decided ones. ``after`` holds what waits for its decision: nodes (their data) and
    callables ``fn(node)`` (a parked program, a composite parent)."""

    __slots__ = ("cmd", "prog", "pe", "engine", "model", "op_id", "seq", "parent", "t_issue",
                 "wait", "cursor", "depth", "ready", "deps", "start", "busy", "end", "rend", "done",
                 "after", "stamp", "queue")

    def __init__(self, cmd: Any, prog: Any, engine: Any, model: Any, t_issue: int,
                 wait: int) -> None:
        self.cmd, self.prog, self.engine, self.model = cmd, prog, engine, model
        self.pe = prog.pe
        self.t_issue = self.ready = t_issue
        self.wait = wait
        self.parent = -1
        self.deps = 0
        self.start = self.busy = self.end = 0
        self.rend = -1  # when it stops reading its inputs, if before ``end`` (a send)
        self.done = False
        self.after: Any = []  # a list; () once decided
        self.stamp = 0
        self.queue: Any = None  # the engine queue it waits in (a deque), if any
        self.op_id = self.seq = self.cursor = self.depth = 0
    # ``program.timed`` builds a node field by field (the per-op path): a new field is set
    # there too

    def __repr__(self) -> str:
        return (f"Node({self.cmd.op.value} op {self.op_id} program {self.prog.program} "
                f"issue {self.t_issue} ready {self.ready} deps {self.deps}"
                + (f" start {self.start} end {self.end})" if self.done else ")"))
