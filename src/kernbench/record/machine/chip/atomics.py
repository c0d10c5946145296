"""A PE's atomics start in the order its resident programs issue them (docs/adr/0843).

One atomic unit per PE: an atomic starts no earlier than the PE's previous atomic of another
program (the same program's already waits for its end: an atomic is acq_rel over its
program's HBM, ADR-0841). Under ``ready_first`` a later-issued atomic could otherwise
overtake an earlier one of another resident program, and the race detector, which orders a
PE's ops by ``seq`` and atomics by their start, would read the trace as a cycle.
"""

from __future__ import annotations

from kernbench.record.machine.chip.node import Node


class _Started:
    """``node``, an atomic, waits for the PE's earlier atomic to start (not to end)."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node

    def __call__(self, earlier: Node) -> None:
        node = self.node
        if earlier.start > node.ready:
            node.ready = earlier.start
        node.deps -= 1
        if not node.deps:
            node.prog.chip.on_ready(node)


def in_issue_order(last: dict[int, Node], node: Node, t: int) -> int:
    """The atomic ``node`` (ready at ``t`` so far) after ``last[pe]``, the PE's previous
    atomic; ``node`` becomes the PE's last. Its readiness (a dependency while the earlier
    one is undecided)."""
    earlier = last.get(node.pe)
    last[node.pe] = node
    if earlier is None or earlier.prog is node.prog:
        return t
    if earlier.done:
        return max(t, earlier.start)
    earlier.after.append(_Started(node))
    node.deps += 1
    return t
