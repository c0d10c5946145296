"""Kernels of the language features of issue 29: ``tl.reduce`` / ``tl.associative_scan``
with user combine functions (an argmax-with-value tuple reduce, a first-order linear
recurrence), ``tl.split`` / ``tl.join`` / ``tl.interleave``, ``tl.histogram``, a 3-D
(batched) ``tl.dot``, ``tensor.cast``. Each a ``Launch`` with a numpy reference, run by
kernbench and by Triton's interpreter (``test_front_end_language``)."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def argmax_combine(value1, index1, value2, index2):
    """Liger/FlagGems style: the larger value, the first index on ties."""
    gt = (value1 > value2) | ((value1 == value2) & (index1 < index2))
    return tl.where(gt, value1, value2), tl.where(gt, index1, index2)


@triton.jit
def add_combine(a, b):
    return a + b


@triton.jit
def reduce_kernel(x_ptr, val_ptr, idx_ptr, sum_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    v, i = tl.reduce((x, tl.broadcast_to(cols, (N,))), 0, argmax_combine)
    tl.store(val_ptr + row, v)
    tl.store(idx_ptr + row, i)
    tl.store(sum_ptr + row, tl.reduce(x, 0, add_combine))


def reduce_launch(rows: int = 4, n: int = 32) -> Launch:
    rng = np.random.default_rng(5)
    x = rng.integers(-6, 6, (rows, n)).astype(np.float32)  # ties: the first index wins
    return Launch("reduce-argmax", reduce_kernel, (rows,),
                  (x, np.zeros(rows, np.float32), np.zeros(rows, np.int32),
                   np.zeros(rows, np.float32)), {"N": n},
                  lambda x_ptr, **_: {"val_ptr": x_ptr.max(1),
                                      "idx_ptr": x_ptr.argmax(1).astype(np.int32),
                                      "sum_ptr": x_ptr.sum(1)})


@triton.jit
def recurrence_combine(a1, b1, a2, b2):
    """h = a * h_prev + b composed: (a1, b1) then (a2, b2)."""
    return a1 * a2, b1 * a2 + b2


@triton.jit
def max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def scan_kernel(a_ptr, b_ptr, h_ptr, m_ptr, r_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    _, h = tl.associative_scan((a, b), 0, recurrence_combine)
    tl.store(h_ptr + offs, h)
    k = (b * 8.0).to(tl.int32)
    tl.store(m_ptr + offs, tl.associative_scan(k, 0, max_combine))
    tl.store(r_ptr + offs, tl.associative_scan(k, 0, add_combine, reverse=True))


def _recurrence(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    h = np.zeros_like(b, dtype=np.float64)
    for r in range(a.shape[0]):
        acc = 0.0
        for j in range(a.shape[1]):
            acc = a[r, j] * acc + b[r, j]
            h[r, j] = acc
    return h.astype(np.float32)


def scan_launch(rows: int = 2, n: int = 16) -> Launch:
    rng = np.random.default_rng(6)
    a = rng.uniform(0.5, 1.0, (rows, n)).astype(np.float32)
    b = rng.standard_normal((rows, n)).astype(np.float32)

    def reference(a_ptr: np.ndarray, b_ptr: np.ndarray, **_: np.ndarray) -> dict:
        k = (b_ptr * np.float32(8)).astype(np.int32)
        return {"h_ptr": _recurrence(a_ptr, b_ptr), "m_ptr": np.maximum.accumulate(k, 1),
                "r_ptr": np.flip(np.cumsum(np.flip(k, 1), 1), 1).astype(np.int32)}

    z = np.zeros((rows, n), np.float32)
    return Launch("scan-recurrence", scan_kernel, (rows,),
                  (a, b, z, np.zeros((rows, n), np.int32), np.zeros((rows, n), np.int32)),
                  {"N": n}, reference)


@triton.jit
def split_join_kernel(x_ptr, s_ptr, j_ptr, i_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * 2 + tl.arange(0, 2)[None, :])  # [N, 2]
    re, im = tl.split(x)
    tl.store(s_ptr + rows, re * 2.0 - im)
    j = tl.join(im, re)  # [N, 2]
    tl.store(j_ptr + rows[:, None] * 2 + tl.arange(0, 2)[None, :], j)
    tl.store(i_ptr + tl.arange(0, 2 * N), tl.interleave(re + 1.0, im.cast(tl.float16)))


def split_join_launch(n: int = 16) -> Launch:
    x = np.random.default_rng(7).standard_normal((n, 2)).astype(np.float32)
    return Launch("split-join", split_join_kernel, (1,),
                  (x, np.zeros(n, np.float32), np.zeros((n, 2), np.float32),
                   np.zeros(2 * n, np.float32)), {"N": n},
                  lambda x_ptr, **_: {
                      "s_ptr": x_ptr[:, 0] * 2 - x_ptr[:, 1], "j_ptr": x_ptr[:, ::-1].copy(),
                      "i_ptr": np.stack([x_ptr[:, 0] + 1, x_ptr[:, 1].astype(np.float16)
                                         .astype(np.float32)], 1).reshape(-1)})


@triton.jit
def histogram_kernel(x_ptr, out_ptr, n, N: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + tl.arange(0, BINS), tl.histogram(x, BINS, mask=offs < n))


def histogram_launch(n: int = 50, bins: int = 8) -> Launch:
    x = np.random.default_rng(8).integers(0, bins, n).astype(np.int32)
    return Launch("histogram", histogram_kernel, (1,), (x, np.zeros(bins, np.int32), n),
                  {"N": 64, "BINS": bins},
                  lambda x_ptr, **_: {"out_ptr": np.bincount(x_ptr, minlength=bins)
                                      .astype(np.int32)})


@triton.jit
def batched_dot_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr):
    i = tl.arange(0, B)[:, None, None] * M * M
    r = tl.arange(0, M)[None, :, None] * M
    c = tl.arange(0, M)[None, None, :]
    a = tl.load(a_ptr + i + r + c)
    b = tl.load(b_ptr + i + r + c)
    tl.store(c_ptr + i + r + c, tl.dot(a, b))


def batched_dot_launch(b: int = 2, m: int = 16) -> Launch:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((b, m, m)).astype(np.float16)
    y = rng.standard_normal((b, m, m)).astype(np.float16)
    return Launch("batched-dot", batched_dot_kernel, (1,), (x, y, np.zeros((b, m, m), np.float32)),
                  {"B": b, "M": m},
                  lambda a_ptr, b_ptr, **_: {"c_ptr": np.matmul(a_ptr.astype(np.float32),
                                                                b_ptr.astype(np.float32))})


@triton.jit
def sort_kernel(x_ptr, k_ptr, s_ptr, d_ptr, t_ptr, c_ptr, N: tl.constexpr, K: tl.constexpr):
    rows = tl.arange(0, 2)[:, None] * N
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows + cols)  # [2, N] fp32
    keys = tl.load(k_ptr + rows + cols)  # [2, N] int32
    tl.store(s_ptr + rows + cols, tl.sort(x))
    tl.store(d_ptr + rows + cols, tl.sort(keys, descending=True))
    tl.store(t_ptr + tl.arange(0, 2)[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K))
    tl.store(c_ptr + tl.arange(0, 2 * N), tl.cat(tl.sum(x, 0), tl.max(keys, 0).to(tl.float32),
                                                   can_reorder=True))


def sort_launch(n: int = 16, k: int = 4) -> Launch:
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, n)).astype(np.float32)
    keys = rng.integers(-20, 20, (2, n)).astype(np.int32)  # repeated keys
    z = np.zeros((2, n), np.float32)
    return Launch("sort-topk", sort_kernel, (1,),
                  (x, keys, z, np.zeros((2, n), np.int32), np.zeros((2, k), np.float32),
                   np.zeros(2 * n, np.float32)), {"N": n, "K": k},
                  lambda x_ptr, k_ptr, **_: {
                      "s_ptr": np.sort(x_ptr, 1), "d_ptr": -np.sort(-k_ptr, 1),
                      "t_ptr": -np.sort(-x_ptr, 1)[:, :k],
                      "c_ptr": np.concatenate([x_ptr.sum(0), k_ptr.max(0).astype(np.float32)])})
