"""The work a row's cost model reads when it is issued again (``Cmd.work``).

The op log says most of it: a transfer's bytes, a MATH op's elements. ``stream.parquet``
holds the rest as the recording's cost models read it (``WORK``: a GEMM's shape, a
composite's tiling, a reduction's input elements, a multi-run transfer's bursts). Two of
those depend on the hardware and are worked out again from the row when it changed: a
transfer's bursts (``dma_burst_bytes``: from its elements, ``schemas/elements.py``, as the
lowering does) and a composite's tiles when the kernel let the staging area choose them
(``stage_kib``: ``commands.tile_rows``).
"""

from __future__ import annotations

import json
from typing import Any

from kernbench.errors import RetimeError
from kernbench.record.commands import tile_rows
from kernbench.record.retime.script import Row, Script
from kernbench.schemas import dtypes
from kernbench.schemas import elements as ix
from kernbench.schemas.ops import OP, OPS, Cost
from kernbench.trace.hw import HwConfig

_BYTES = frozenset(op for op, s in OPS.items() if s.cost in (Cost.DMA_READ, Cost.DMA_WRITE,
                                                             Cost.LINK))
_ELEMENTS = frozenset(op for op, s in OPS.items() if s.cost in (Cost.MATH,
                                                                Cost.TRANSCENDENTAL,
                                                                Cost.SOFTMAX))
_DMA = frozenset(op for op, s in OPS.items() if s.cost in (Cost.DMA_READ, Cost.DMA_WRITE))
#: the DMA ops whose HBM operand is their output (the rest read it as their first input)
_WRITES_HBM = frozenset({OP.DMA_WRITE, OP.SCATTER})
_BY_ELEMENT = frozenset({OP.GATHER, OP.SCATTER})  # one burst per element, offsets from TCM


class Works:
    """Each row's work on the new hardware (``old``: the recording's)."""

    def __init__(self, old: HwConfig, new: HwConfig, access: ix.AccessTable) -> None:
        self.burst = new.dma_burst_bytes
        self.rebursts = old.dma_burst_bytes != new.dma_burst_bytes
        self.stage, self.restage = new.stage_bytes, old.stage_bytes != new.stage_bytes
        self.access = access
        self._memo: dict[tuple[str, tuple[int, ...], int], tuple[int, ...]] = {}

    def of(self, script: Script, row: Row) -> tuple[int, ...]:
        op = row.op
        if self.rebursts and op in _DMA:
            return self._dma(row)
        got = script.works.get(row.seq)
        if got is not None:
            return got
        if op in _ELEMENTS:
            return (row.num,)
        if op in _BYTES:
            return (row.nbytes,)
        return ()

    def _dma(self, row: Row) -> tuple[int, ...]:
        """A transfer's work at this burst size, worked out from its row."""
        hbm = row.out if row.op in _WRITES_HBM else row.inputs[0]
        assert hbm is not None, "a transfer names its HBM operand"
        isz = dtypes.DTYPES[hbm[4]].itemsize
        if row.attrs == "{}":
            return (row.nbytes,)
        attrs = json.loads(row.attrs)
        if row.op in _BY_ELEMENT or attrs.get("offsets") == ix.INPUT:
            n = row.num
            return (n * isz,) if n <= 1 else (n * isz, n * self.burst, n)
        key = (row.attrs, hbm[3], isz)
        got = self._memo.get(key)
        if got is None:
            rel, mask = ix.elements(attrs, hbm[3], self.access)
            got = ix.dma_work(ix.moved(rel, mask), isz, self.burst)
            if len(self._memo) > 4096:
                self._memo.clear()
            self._memo[key] = got
        return got

    def composite(self, script: Script, row: Row, stored: tuple[int, ...], itemsize: int,
                  auto: bool) -> tuple[int, ...]:
        """A composite GEMM's ``(M, N, K, trans_b, tile rows)`` on this staging area."""
        work: Any = script.works[row.seq]
        if not self.restage:
            return work
        rows = tile_rows((stored[0], stored[1]), itemsize, self.stage, None) if auto else work[4]
        if rows * stored[1] * itemsize > self.stage // 2:
            raise RetimeError(f"{row.src}: the composite GEMM (op {row.op_id}) streams tiles "
                              f"of {rows * stored[1] * itemsize} bytes, more than half the "
                              f"staging area ({self.stage // 2} bytes) of the new hardware")
        return (*work[:4], rows)
