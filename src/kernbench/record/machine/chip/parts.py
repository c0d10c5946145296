"""The chip's shared parts, built from the hardware config: the HBM stack, each PE's TCM
port, the fabric of links (``record/machine/shared/``; None where the part is unlimited, so
it costs nothing)."""

from __future__ import annotations

from kernbench.record.machine.shared.fabric import Fabric
from kernbench.record.machine.shared.hbm import HbmStack
from kernbench.record.machine.shared.tcm import TcmPort
from kernbench.trace.hw import HwConfig


class Parts:
    """What the chip's PEs share: ``hbm`` (None: unlimited), ``tcm`` (one port per PE, None:
    unlimited), ``fabric`` (the links of ``span`` PEs)."""

    def __init__(self, hw: HwConfig, n_pe: int, span: int) -> None:
        self.hbm: HbmStack | None = HbmStack(hw) if hw.hbm_total_gbps > 0 else None
        self.tcm: list[TcmPort] | None = ([TcmPort(hw, pe) for pe in range(n_pe)]
                                          if hw.tcm_gbps > 0 else None)
        self.fabric = Fabric(hw, span)

    def carry(self, src: int, dst: int, t: int, nbytes: int, direct: bool = False
              ) -> tuple[int, int, int, list[tuple[str, str, int]]]:
        """(start, busy, arrival, shared rows) of a message from ``src`` to ``dst`` whose
        source is visible at ``t`` (``direct``: over the link between them, a ring's
        ``next`` or ``prev``)."""
        fabric = self.fabric
        to: int | str = dst
        if direct:
            to = "next" if dst == (src + 1) % fabric.n else "prev"
        path = fabric.path(src, to)
        if not path:
            return t, 0, t, []
        free = fabric.servers[path[0]].free
        start = free if free > t else t  # when the first link takes the message
        arrival, ideal, occupied, binding = fabric.send(t, src, to, nbytes)
        rows = [] if arrival <= ideal or binding is None else [
            ("link", fabric.resource(binding), arrival - ideal)]
        return start, occupied - start, arrival, rows
