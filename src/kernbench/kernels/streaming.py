"""stream-sum: a load-bound streaming reduction, multi-buffered with ``tl.load(out=)``.

The numpy reference lives in kernbench/case/references.py (docs/adr/0005-isolated-replay.md)."""

from __future__ import annotations

import kernbench as kb
from kernbench import tl
from kernbench.case import references


@kb.kernel
def stream_sum(x, y, *, tiles: int, rows: int, cols: int, buffers: int):
    """y = sum over tiles of 2 * exp(x_tile / 2).

    ``buffers = 2`` is double buffering: at the top of iteration j the load of tile j+1 goes
    (``out=``) into the persistent buffer tile j-1 used, while tile j is computed.
    ``buffers = 1`` loads each tile where it is used (no prefetch); more buffers prefetch
    deeper."""
    pid = tl.program_id(0)
    tile = rows * cols
    base = x + pid * tiles * tile
    acc = tl.zeros((rows, cols), tl.float32)
    bufs = [tl.load(base + i * tile, (rows, cols), tl.float32)
            for i in range(min(buffers - 1, tiles))]
    for j in range(tiles):
        ahead = j + buffers - 1
        if buffers > 1 and ahead < tiles:
            if len(bufs) < buffers:
                bufs.append(tl.load(base + ahead * tile, (rows, cols), tl.float32))
            else:
                tl.load(base + ahead * tile, (rows, cols), tl.float32, out=bufs[ahead % buffers])
        with tl.scratch_scope():
            cur = bufs[j % buffers] if buffers > 1 else tl.load(
                base + j * tile, (rows, cols), tl.float32)
            tl.copy_to(acc, acc + tl.exp(cur * 0.5) * 2.0)
    tl.store(y + pid * tile, acc)


@kb.register_case("stream-sum")
def stream_sum_case(programs: int = 1, tiles: int = 32, rows: int = 256, cols: int = 128,
                    buffers: int = 2) -> kb.Case:
    """Streaming exp-sum over ``tiles`` [rows, cols] float32 tiles per program, prefetching
    ``buffers - 1`` tiles ahead into persistent buffers."""
    if tiles < 1 or buffers < 1:
        raise kb.BadInputError(f"stream-sum needs tiles >= 1 and buffers >= 1, got {tiles}, "
                               f"{buffers}")

    return kb.Case(
        name="stream-sum", kernel=stream_sum, grid=(programs,),
        tensors={"x": kb.tensor((programs * tiles * rows, cols), "float32",
                                init=kb.randn(seed=5, scale=0.5)),
                 "y": kb.tensor((programs, rows, cols), "float32", role="output")},
        params={"tiles": tiles, "rows": rows, "cols": cols, "buffers": buffers},
        reference=references.stream_sum(programs=programs, tiles=tiles, rows=rows, cols=cols),
    )
