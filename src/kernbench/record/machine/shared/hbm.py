"""The HBM stack every PE's DMA shares: ``hbm_channels`` channels, each a FIFO server (the
``Server`` of ``server.py``) at ``hbm_total_gbps / hbm_channels``, and the address
interleave across them.

Block ``b = addr // hbm_interleave_bytes`` of the one HBM address space lives on channel
``b % hbm_channels`` (gem5's channel interleave, HBM3's 16 channels). A transfer of the
bytes ``[addr, addr + nbytes)`` puts each channel's share of them on that channel, FIFO
from the transfer's start ``t``; it is done when its last channel is. The shares are
counted in closed form, O(channels) whatever the length (``channel_bytes``).

The channels are one bank, not one object each: a transfer is on the per-op path of every
DMA. Channel ``c`` is free at ``max(raw[c] + lift, floor)``: a transfer that gives every
channel the same share (an aligned tile of whole stripes, the common case) moves ``lift``
and ``floor`` for all of them at once, in O(1); any other updates the channels it touches.
A transfer's per-channel costs are kept by (address within a stripe, length), so a shape
repeated costs its arithmetic once. Answers are exactly those of one ``Server`` per channel
(``tests/record/machine/shared/test_hbm.py`` compares them).

``hbm_total_gbps = 0`` is unlimited (ahbm-v1 and ahbm-v2): a transfer costs the stack
nothing and ``transfer`` returns at once.
"""

from __future__ import annotations

from fractions import Fraction

from kernbench.record.machine.shared.server import ps_per_byte
from kernbench.record.memo import BoundedMemo
from kernbench.trace.hw import HwConfig

#: ``channel`` of a transfer nothing delayed on the stack (unlimited, or no bytes)
NO_CHANNEL = -1
#: transfer shapes whose per-channel costs are kept
PATTERNS = 4096
#: a transfer's costs: the one cost of every channel (-1: not uniform), the (channel, cost)
#: pairs of the channels it touches, its largest cost, their sum
Pattern = tuple[int, tuple[tuple[int, int], ...], int, int]


def channel_bytes(addr: int, nbytes: int, block: int, channels: int) -> list[int]:
    """How many of the bytes ``[addr, addr + nbytes)`` each channel holds when block ``b``
    (``block`` bytes) lives on channel ``b % channels``."""
    out = [0] * channels
    if nbytes <= 0:
        return out
    end = addr + nbytes
    first, last = addr // block, (end - 1) // block
    if first == last:
        out[first % channels] = nbytes
        return out
    out[first % channels] += (first + 1) * block - addr
    out[last % channels] += end - last * block
    whole, extra = divmod(last - first - 1, channels)  # the full blocks between
    if whole:
        for c in range(channels):
            out[c] += whole * block
    start = (first + 1) % channels
    for k in range(extra):
        out[(start + k) % channels] += block
    return out


class HbmStack:
    """The chip's HBM: ``transfer(t, addr, nbytes) -> (done, ideal, channel)``."""

    __slots__ = ("unlimited", "block", "channels", "span", "num", "den", "raw", "lift",
                 "floor", "top", "top_channel", "bytes", "busy_ps", "_patterns")

    def __init__(self, hw: HwConfig) -> None:
        self.unlimited = not hw.hbm_total_gbps
        self.block, self.channels = hw.hbm_interleave_bytes, hw.hbm_channels
        self.span = self.block * self.channels  # one stripe: a block on every channel
        per = (Fraction(0) if self.unlimited else
               ps_per_byte(Fraction(str(hw.hbm_total_gbps)) / hw.hbm_channels))
        self.num, self.den = per.numerator, per.denominator
        self.raw = [0] * self.channels  # channel c is free at max(raw[c] + lift, floor)
        self.lift = self.floor = 0
        self.top = self.top_channel = 0  # the largest raw, and its lowest channel
        self.bytes = self.busy_ps = 0  # moved by the stack; its channels' busy time, summed
        self._patterns = BoundedMemo()

    def resource(self, channel: int) -> str:
        """The channel as ``shared.parquet`` names it: ``hbm.ch3``."""
        return f"hbm.ch{channel}"

    def cost(self, nbytes: int) -> int:
        """Picoseconds ``nbytes`` hold one channel with no other traffic."""
        return -(-nbytes * self.num // self.den)

    def free(self, channel: int) -> int:
        """When ``channel`` has served every transfer so far."""
        free = self.raw[channel] + self.lift
        return free if free > self.floor else self.floor

    def shares(self, addr: int, nbytes: int) -> list[int]:
        """Each channel's bytes of ``[addr, addr + nbytes)``."""
        return channel_bytes(addr, nbytes, self.block, self.channels)

    def _pattern(self, shares: list[int]) -> Pattern:
        cost = self.cost
        pairs = tuple((c, cost(n)) for c, n in enumerate(shares) if n)
        busies = [b for _, b in pairs]
        uniform = busies[0] if len(pairs) == self.channels and min(shares) == max(
            shares) else -1
        return uniform, pairs, max(busies), sum(busies)

    def transfer(self, t: int, addr: int, nbytes: int) -> tuple[int, int, int]:
        """Move ``[addr, addr + nbytes)`` from ``t``: ``(done, ideal, channel)``, where
        ``done`` is when the last channel has served its share, ``ideal`` the same with
        no other traffic, and ``channel`` the channel that finished last (the lowest of
        a tie; ``NO_CHANNEL`` when unlimited or empty). Transfers come in time order (the
        caller's contract, as for ``Server``)."""
        if self.unlimited or nbytes <= 0:
            return t, t, NO_CHANNEL
        key = (addr % self.span, nbytes)
        pattern = self._patterns.get(key)
        if pattern is None:
            pattern = self._patterns.put(key, self._pattern(self.shares(addr, nbytes)),
                                         PATTERNS)
        self.bytes += nbytes
        return self._serve(t, pattern)

    def serve_shares(self, t: int, shares: list[int]) -> tuple[int, int, int]:
        """``transfer`` of bytes already counted per channel (the sum of several runs'
        ``shares``, for a transfer of many runs)."""
        if self.unlimited or not any(shares):
            return t, t, NO_CHANNEL
        self.bytes += sum(shares)
        return self._serve(t, self._pattern(shares))

    def _serve(self, t: int, pattern: Pattern) -> tuple[int, int, int]:
        uniform, pairs, most, total = pattern
        self.busy_ps += total
        if uniform >= 0:  # every channel: free = max(free, t) + uniform
            lift = self.lift = self.lift + uniform
            floor = self.floor = (self.floor if self.floor > t else t) + uniform
            top = self.top + lift
            return (top, t + most, self.top_channel) if top > floor else (floor, t + most, 0)
        raw, lift, floor = self.raw, self.lift, self.floor
        done, channel = t, NO_CHANNEL
        for c, busy in pairs:
            free = raw[c] + lift
            if free < floor:
                free = floor
            end = (free if free > t else t) + busy
            r = raw[c] = end - lift
            if r > self.top or (r == self.top and c < self.top_channel):
                self.top, self.top_channel = r, c
            if end > done:
                done, channel = end, c
        return done, t + most, channel
