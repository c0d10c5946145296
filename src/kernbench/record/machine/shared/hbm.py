"""The HBM stack every PE's DMA shares: ``hbm_channels`` channels, each a ``Server`` at
``hbm_total_gbps / hbm_channels``, and the address interleave across them.

Block ``b = addr // hbm_interleave_bytes`` of the one HBM address space lives on channel
``b % hbm_channels`` (gem5's channel interleave, HBM3's 16 channels). A transfer of the
bytes ``[addr, addr + nbytes)`` puts each channel's share of them on that channel, FIFO
from the transfer's start ``t``; it is done when its last channel is. The shares are
counted in closed form, O(channels) whatever the length (``channel_bytes``).

``hbm_total_gbps = 0`` is unlimited (ahbm-v1 and ahbm-v2): a transfer costs the stack
nothing and ``transfer`` returns at once.
"""

from __future__ import annotations

from fractions import Fraction

from kernbench.record.machine.shared.server import Server
from kernbench.trace.hw import HwConfig

#: ``channel`` of a transfer nothing delayed on the stack (unlimited, or no bytes)
NO_CHANNEL = -1


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

    __slots__ = ("unlimited", "block", "channels", "servers")

    def __init__(self, hw: HwConfig, server: type[Server] = Server) -> None:
        self.unlimited = not hw.hbm_total_gbps
        self.block, self.channels = hw.hbm_interleave_bytes, hw.hbm_channels
        rate = (Fraction(0) if self.unlimited else
                Fraction(str(hw.hbm_total_gbps)) / hw.hbm_channels)
        self.servers: list[Server] = [] if self.unlimited else [
            server(rate, f"hbm.ch{c}") for c in range(self.channels)]

    def resource(self, channel: int) -> str:
        """The channel as ``shared.parquet`` names it: ``hbm.ch3``."""
        return f"hbm.ch{channel}"

    def shares(self, addr: int, nbytes: int) -> list[int]:
        """Each channel's bytes of ``[addr, addr + nbytes)``."""
        return channel_bytes(addr, nbytes, self.block, self.channels)

    def transfer(self, t: int, addr: int, nbytes: int) -> tuple[int, int, int]:
        """Move ``[addr, addr + nbytes)`` from ``t``: ``(done, ideal, channel)``, where
        ``done`` is when the last channel has served its share, ``ideal`` the same with
        no other traffic, and ``channel`` the channel that finished last (the lowest of
        a tie; ``NO_CHANNEL`` when unlimited or empty)."""
        if self.unlimited or nbytes <= 0:
            return t, t, NO_CHANNEL
        return self.serve_shares(t, self.shares(addr, nbytes))

    def serve_shares(self, t: int, shares: list[int]) -> tuple[int, int, int]:
        """``transfer`` of bytes already counted per channel (the sum of several runs'
        ``shares``, for a transfer of many runs)."""
        if self.unlimited:
            return t, t, NO_CHANNEL
        done, channel, most = t, NO_CHANNEL, 0
        servers = self.servers
        for c, n in enumerate(shares):
            if n:
                end = servers[c].serve(t, n)
                if end > done:
                    done, channel = end, c
                if n > most:
                    most = n
        ideal = t + servers[0].cost(most)
        return done, ideal, channel

    @property
    def bytes(self) -> int:
        """Bytes the stack has moved."""
        return sum(s.bytes for s in self.servers)
