"""Copy one ``ROWS x COLS`` tile of a row-major matrix into a contiguous output: a row tile
(whole rows: one contiguous run) or a column tile (a few columns of every row: one run per
row) of the same bytes, for the DMA cost of strided transfers."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def tile_copy_kernel(x_ptr, out_ptr, stride, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, COLS)
    tile = tl.load(x_ptr + rows[:, None] * stride + cols[None, :])
    tl.store(out_ptr + rows[:, None] * COLS + cols[None, :], tile)


def launch(rows: int = 4, cols: int = 64, n: int = 64, seed: int = 0) -> Launch:
    x = np.random.default_rng(seed).standard_normal((n, n), dtype=np.float32)
    out = np.zeros((rows, cols), np.float32)
    return Launch("triton-tile-copy", tile_copy_kernel, (1,), (x, out, n),
                  {"ROWS": rows, "COLS": cols},
                  lambda x_ptr, **_: {"out_ptr": x_ptr[:rows, :cols].copy()})


def case(rows: int = 4, cols: int = 64, n: int = 64, seed: int = 0):
    return launch(rows, cols, n, seed).case()
