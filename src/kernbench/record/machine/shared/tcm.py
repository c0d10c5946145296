"""A PE's TCM port: one ``Server`` at ``tcm_gbps`` that every engine of the PE shares.

Every byte an op moves through TCM (``schemas/traffic.py``: a DMA's tile written in, a
store's tile read out, a GEMM's operands and result, a MATH op's inputs and output, a
send's source) is served by the port FIFO from the op's start, so an op takes at least its
TCM bytes at the port's rate, and two ops streaming at once share it. ``tcm_gbps = 0`` is
unlimited (ahbm-v1 and ahbm-v2): ``move`` returns at once.
"""

from __future__ import annotations

from kernbench.record.machine.shared.server import Server
from kernbench.trace.hw import HwConfig


class TcmPort:
    """PE ``pe``'s TCM port: ``move(t, nbytes) -> (done, ideal)``."""

    __slots__ = ("server", "resource")

    def __init__(self, hw: HwConfig, pe: int = 0, server: type[Server] = Server) -> None:
        #: the port as ``shared.parquet`` names it
        self.resource = f"tcm.pe{pe}"
        self.server = server(hw.tcm_gbps, self.resource) if hw.tcm_gbps else None

    @property
    def unlimited(self) -> bool:
        return self.server is None

    def move(self, t: int, nbytes: int) -> tuple[int, int]:
        """Move ``nbytes`` through the port from ``t``: ``(done, ideal)``, ``ideal`` being
        ``done`` with no other traffic."""
        server = self.server
        if server is None or nbytes <= 0:
            return t, t
        busy = -(-nbytes * server.num // server.den)  # server.cost, without the call
        return server.serve(t, nbytes), t + busy
