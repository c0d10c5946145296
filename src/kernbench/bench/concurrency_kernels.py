"""The two kernels of issue 41 (docs/hardware-model.md, "What concurrency buys"): loops whose
ops depend on each other, where resident programs help only if a program that waits does not
block the others (``engine_arbitration``):

- ``softmax_rows_case``: the Triton tutorial's fused softmax as its tutorial launches it,
  fewer programs than rows, each looping over every ``programs``-th row
  (``tl.range(start, n_rows, step)``);
- ``tile_chain_case``: a native ``tl`` loop, each program ``load -> add -> copy_to`` over its
  tiles into one accumulator.

Both are case factories (``kernbench record kernbench.bench.concurrency_kernels:...``)."""

from __future__ import annotations

from typing import Any

import numpy as np

import kernbench as kb
from kernbench import tl
from kernbench.case.triton_hook import install
from kernbench.triton import case as triton_case

install()  # Triton source: the stand-in where no triton is installed
import triton  # noqa: E402
import triton.language as ttl  # noqa: E402


@kb.kernel
def tile_chain(x, y, *, tiles: int, n: int):
    """Each program: load -> add -> copy_to over its tiles (a dependency chain)."""
    pid = tl.program_id(0)
    acc = tl.zeros((n,), tl.float32)
    for j in range(tiles):
        with tl.scratch_scope():
            a = tl.load(x + (pid * tiles + j) * n, (n,), tl.float32)
            tl.copy_to(acc, acc + a)
    tl.store(y + pid * n, acc)


def tile_chain_case(programs: int = 64, tiles: int = 16, n: int = 4096) -> kb.Case:
    """``programs`` programs, each summing ``tiles`` tiles of ``n`` fp32 (16 KiB at 4096)."""
    x = np.random.default_rng(0).standard_normal((programs, tiles, n), dtype=np.float32)
    return kb.Case(name="tile-chain", kernel=tile_chain, grid=(programs,),
                   tensors={"x": kb.tensor(x.shape, "float32", init=kb.data(x)),
                            "y": kb.tensor((programs, n), "float32", role="output")},
                   params={"tiles": tiles, "n": n},
                   reference=lambda x: {"y": x.sum(axis=1)})


@triton.jit
def softmax_rows(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols,
                 BLOCK: ttl.constexpr):
    """The Triton tutorial's fused softmax: each program loops over rows."""
    start = ttl.program_id(0)
    step = ttl.num_programs(0)
    for row in ttl.range(start, n_rows, step):
        offs = ttl.arange(0, BLOCK)
        mask = offs < n_cols
        x = ttl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
        num = ttl.exp(x - ttl.max(x, axis=0))
        ttl.store(out_ptr + row * out_stride + offs, num / ttl.sum(num, axis=0), mask=mask)


def _softmax_reference(in_ptr: np.ndarray, **_: Any) -> dict[str, Any]:
    e = np.exp(in_ptr - in_ptr.max(axis=1, keepdims=True))
    return {"out_ptr": e / e.sum(axis=1, keepdims=True)}


def softmax_rows_case(rows: int = 1024, cols: int = 1024, programs: int = 64) -> kb.Case:
    """A ``rows x cols`` fp32 softmax by ``programs`` programs (16 rows each by default)."""
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
    out = np.zeros_like(x)
    block = 1 << max(cols - 1, 0).bit_length()
    return triton_case(softmax_rows, (programs,), out, x, cols, cols, rows, cols, BLOCK=block,
                       name="tutorial-softmax", reference=_softmax_reference)
