"""The PE scheduler's composite GEMM: stream an HBM operand through the staging area.

``composite(op="gemm", a, b=ref)`` is one parent row (kind ``composite``, engine ``none``)
followed by, per streamed tile, a child ``memory/dma_read`` (HBM -> a staging slot) and a
child ``gemm/dot``. The staging area is split in two slots (double buffering): the DMA of
tile i+1 goes into the slot tile i-1 used, as soon as that tile's GEMM has read it, so it
overlaps the GEMM of tile i.

Result layout: with ``trans_b`` (``b`` stored ``[N, K]``, as in ``Q @ K^T``) each tile yields a
column block of ``[M, N]``; the result buffer holds ``[N, M]`` row-major and the kernel gets
its transposed view, so every child writes a contiguous block. Without ``trans_b`` tiles
split K: child i reads columns ``a_cols = [k0, k1]`` of ``a`` and accumulates in float32 into
the whole result (reading it back as ``acc`` from the second tile on).
"""

from __future__ import annotations

from kernbench.record.commands import Cmd
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.record.machine.protocol import PE
from kernbench.record.machine.timing import TIMING
from kernbench.schemas.ops import OP


def children(cmd: Cmd, pe: int, stage_bytes: int) -> list[tuple[Cmd, Cmd]]:
    """The (dma_read, dot) command pair of every streamed tile."""
    a, b = cmd.inputs
    out = cmd.out
    assert out is not None, "a composite GEMM writes a result buffer"
    trans_b, rows = cmd.work[3], cmd.work[4]
    stored_rows, width = b.shape  # the ref as stored in HBM ([N, K] with trans_b)
    m = a.shape[0]
    half = stage_bytes // 2
    pairs = []
    ins: tuple[TensorHandle, ...]
    for i, r0 in enumerate(range(0, stored_rows, rows)):
        r = min(rows, stored_rows - r0)
        nbytes = r * width * b.dtype.itemsize
        src_hbm = TensorHandle(Buffer("hbm", b.pe, b.addr + r0 * width * b.dtype.itemsize,
                                      nbytes, None, cmd.src), (r, width), b.dtype)
        staged = TensorHandle(Buffer("stage", pe, (i % 2) * half, nbytes, None, cmd.src),
                              (r, width), b.dtype)
        dma = Cmd(OP.DMA_READ, (src_hbm,), staged, r * width, nbytes, (nbytes,), cmd.src)
        if trans_b:  # a[M,K] @ tile^T -> rows r0.. of the [N, M] result buffer
            block = TensorHandle(Buffer("tcm", pe, out.addr + r0 * m * 4, r * m * 4,
                                        out.buf.scope, cmd.src), (m, r), out.dtype, True)
            ins = (a, TensorHandle(staged.buf, (width, r), b.dtype, True))
            dot = Cmd(OP.DOT, ins, block, m * r, m * r * 4, (m, r, width), cmd.src,
                      2 * m * r * width)
        else:  # a[:, r0:r0+r] @ tile -> accumulate into the whole [M, N] result
            n = width
            ins = (a, staged) if i == 0 else (a, staged, out)
            dot = Cmd(OP.DOT, ins, out, m * n, m * n * 4, (m, n, r), cmd.src, 2 * m * n * r,
                      f'{{"a_cols":[{r0},{r0 + r}]}}')
        pairs.append((dma, dot))
    return pairs


def run_composite(pe: PE, cmd: Cmd) -> None:
    """Time the streamed tiles in closed form and log the parent row, then the children."""
    ready = pe.now
    for h in cmd.inputs[:1]:
        if h.buf.ready_ps > ready:
            ready = h.buf.ready_ps
    wait = ready - pe.now + pe.take_wait()
    t_issue = ready + pe.dispatch_ps
    slot_free = [t_issue, t_issue]
    timed = []
    for i, (dma, dot) in enumerate(children(cmd, pe.index, pe.hw.stage_bytes)):
        d_issue = max(t_issue, slot_free[i % 2])
        d_busy, d_lat = TIMING[OP.DMA_READ](pe, dma)
        d_start = pe.dma_rd.occupy(d_issue, d_busy)
        d_end = d_start + d_busy + d_lat
        g_busy, _ = TIMING[OP.DOT](pe, dot)
        g_start = pe.gemm.occupy(d_end, g_busy)
        g_end = g_start + g_busy
        slot_free[i % 2] = g_end
        timed.append((dma, d_issue, d_start, d_end, d_busy))
        timed.append((dot, d_end, g_start, g_end, g_busy))
    t_end = max(row[3] for row in timed)
    parent = pe.record(cmd, ready, timed[0][2], t_end, 0, wait)
    for child, c_issue, c_start, c_end, c_busy in timed:
        pe.record(child, c_issue, c_start, c_end, c_busy, 0, parent)
    pe.now = t_end
