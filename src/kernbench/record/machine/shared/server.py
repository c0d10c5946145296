"""The one resource of the shared memory system: a part that moves bytes at a fixed rate.

A ``Server`` serves its requests first come, first served and is work-conserving: a
request made at ``t`` for ``n`` bytes starts at ``max(t, free)`` (``free``: when the
request before it ended) and holds the part ``ceil(n * ps_per_byte)`` picoseconds, exact
in integers (the rate is a ``Fraction``; GB/s are bytes per ns). The HBM channel, the TCM
port and a link are Servers (``hbm.py``, ``tcm.py``, ``fabric.py``); a policy other than
FIFO would be a subclass overriding ``serve``.

Requests must come in non-decreasing ``t`` (the chip decides every op in global time
order): then FIFO is work-conserving, because a request that waits finds the part busy
with earlier requests for the whole wait. That is the caller's contract, not checked per
request: the chip's hazard tests start ops out of order on purpose and must still get a
trace (whose replay then fails); ``LoggedServer`` and the property tests check it. A
request of no bytes needs no part: it ends at ``t`` and leaves the part as it was.

``LoggedServer`` keeps every request's ``(t, start, end, nbytes)`` for tests; a plain
``Server`` keeps only its counters, so the log costs nothing on the per-op path.
"""

from __future__ import annotations

from fractions import Fraction


def ps_per_byte(gbps: float | Fraction) -> Fraction:
    """Picoseconds per byte at ``gbps`` GB/s (bytes per ns), exactly: a float is read by its
    decimal text (819.2 is 8192/10, not the nearest binary fraction)."""
    rate = gbps if isinstance(gbps, Fraction) else Fraction(str(gbps))
    if rate <= 0:
        raise ValueError(f"a server needs a positive rate, got {gbps!r} GB/s")
    return Fraction(1000) / rate


class Server:
    """A part moving bytes at ``gbps``, FIFO and work-conserving, in integer picoseconds.

    ``busy_ps`` and ``bytes`` count what it served; ``free`` is when its last request
    ends."""

    __slots__ = ("name", "num", "den", "free", "bytes", "busy_ps")

    def __init__(self, gbps: float | Fraction, name: str = "") -> None:
        per = ps_per_byte(gbps)
        self.name = name
        self.num, self.den = per.numerator, per.denominator
        self.free = 0  # when the last request ends
        self.bytes = 0
        self.busy_ps = 0

    def cost(self, nbytes: int) -> int:
        """Picoseconds ``nbytes`` hold the part with no other traffic."""
        return -(-nbytes * self.num // self.den)

    def serve(self, t: int, nbytes: int) -> int:
        """Serve ``nbytes`` requested at ``t`` after every earlier request; the end time."""
        if not nbytes:
            return t
        busy = -(-nbytes * self.num // self.den)
        free = self.free
        end = self.free = (t if t > free else free) + busy
        self.bytes += nbytes
        self.busy_ps += busy
        return end


class LoggedServer(Server):
    """A Server that also logs every request as ``(t, start, end, nbytes)`` (tests)."""

    __slots__ = ("log",)

    def __init__(self, gbps: float | Fraction, name: str = "") -> None:
        super().__init__(gbps, name)
        self.log: list[tuple[int, int, int, int]] = []

    def serve(self, t: int, nbytes: int) -> int:
        end = super().serve(t, nbytes)
        if nbytes:
            self.log.append((t, end - self.cost(nbytes), end, nbytes))
        return end
