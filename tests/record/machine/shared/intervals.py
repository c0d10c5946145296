"""What every shared part must satisfy, checked on a ``LoggedServer``'s log of
``(t, start, end, nbytes)``: the definitions of conservation and work
conservation, written out independently of the server's own arithmetic."""

from __future__ import annotations

from fractions import Fraction

Log = list[tuple[int, int, int, int]]


def conserving(log: Log, gbps: Fraction) -> bool:
    """No interval moves more bytes than the rate allows: for every run of requests served
    back to back or not, the bytes served from the first's start to the last's end fit in
    that span at ``gbps`` bytes per ns (so requests never overlap either)."""
    spans = sorted((start, end, n) for _, start, end, n in log)
    for i in range(len(spans)):
        total = 0
        for j in range(i, len(spans)):
            total += spans[j][2]
            if total * 1000 > (spans[j][1] - spans[i][0]) * gbps:
                return False
    return True


def work_conserving(log: Log) -> bool:
    """A request that waits finds the part busy for its whole wait: ``[t, start)`` is
    covered by the busy intervals of the requests served before it."""
    for k, (t, start, _, _) in enumerate(log):
        if start == t:
            continue
        busy = sorted((s, e) for _, s, e, _ in log[:k])
        reach = start  # walk the busy intervals back from the start
        for s, e in reversed(busy):
            if e >= reach and s < reach:
                reach = s
        if reach > t:
            return False
    return True
