"""The bench's GQA flash-decoding kernel (``kernbench.bench.triton_kernels``) at test size:
``tl.trans`` of a loaded tile inside ``tl.dot``, a query group padded to 16 rows and masked,
an online softmax over a ragged last key tile."""

from __future__ import annotations

from kernbench.bench import triton_kernels as bench
from tests.triton.kernels.spec import Launch


def launch(s_kv: int = 300, kv_heads: int = 2, group: int = 4, head_dim: int = 32,
           block_n: int = 64, seed: int = 0) -> Launch:
    kernel, grid, args, meta = bench.decode_launch(s_kv, kv_heads, group, head_dim, block_n,
                                                   seed)
    return Launch("triton-gqa-decode", kernel, grid, args, meta,
                  bench.decode_reference)


def case(s_kv: int = 300, kv_heads: int = 2, group: int = 4, head_dim: int = 32,
         block_n: int = 64, seed: int = 0):
    return launch(s_kv, kv_heads, group, head_dim, block_n, seed).case()
