"""Gather by loaded indices: an embedding lookup. Token ids are loaded (data), then the rows
of the table they name are loaded; the last block of tokens is masked."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def embedding_kernel(ids_ptr, table_ptr, out_ptr, n_tokens, D: tl.constexpr,
                     BLOCK_T: tl.constexpr):
    pid = tl.program_id(0)
    offs_t = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    tmask = offs_t < n_tokens
    ids = tl.load(ids_ptr + offs_t, mask=tmask, other=0)
    cols = tl.arange(0, D)
    rows = tl.load(table_ptr + ids[:, None] * D + cols[None, :], mask=tmask[:, None])
    tl.store(out_ptr + offs_t[:, None] * D + cols[None, :], rows, mask=tmask[:, None])


def reference(ids_ptr: np.ndarray, table_ptr: np.ndarray, **_: np.ndarray
              ) -> dict[str, np.ndarray]:
    return {"out_ptr": table_ptr[ids_ptr]}


def launch(n_tokens: int = 37, vocab: int = 50, d: int = 32, block_t: int = 16,
           seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, n_tokens, dtype=np.int32)
    table = rng.standard_normal((vocab, d), dtype=np.float32)
    out = np.zeros((n_tokens, d), np.float32)
    return Launch("triton-embedding", embedding_kernel,
                  lambda meta: (triton.cdiv(n_tokens, meta["BLOCK_T"]),),
                  (ids, table, out, n_tokens), {"D": d, "BLOCK_T": block_t}, reference)


def case(n_tokens: int = 37, vocab: int = 50, d: int = 32, block_t: int = 16, seed: int = 0):
    return launch(n_tokens, vocab, d, block_t, seed).case()
