"""64-bit and small integers end to end, in the style of the public libraries that need them:
a cross-entropy with int64 targets and ``ignore_index`` (Liger-Kernel / FlagGems), an
embedding gather by int64 ids, a MoE GEMM's ``.to(tl.int64)`` of loaded token indices, a MoE
routing histogram (int64 atomics at int64 offsets) and its prefix sum, a top-k/sort on
uint32 keys made from float bits (a bitcast of loaded data, as radix sorts do), and Triton's
fixed-width arithmetic on int64/uint32/uint8/int16 data (wrap-around, C ``//`` and
``%``, shifts, unsigned comparisons, casts) against numpy's closed forms.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.embedding import embedding_kernel
from tests.triton.kernels.embedding import reference as embedding_reference
from tests.triton.kernels.spec import Launch


# -- cross-entropy with int64 targets and ignore_index --------------------------------------
@triton.jit
def cross_entropy_kernel(logits_ptr, target_ptr, loss_ptr, count_ptr, n_rows, n_cols,
                         ignore_index, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < n_rows
    tgt = tl.load(target_ptr + rows, mask=rmask, other=ignore_index)  # int64
    valid = (tgt != ignore_index) & rmask
    cols = tl.arange(0, BLOCK_C)
    x = tl.load(logits_ptr + rows[:, None] * n_cols + cols[None, :],
                mask=rmask[:, None] & (cols[None, :] < n_cols), other=-float("inf"))
    m = tl.max(x, axis=1)
    lse = m + tl.log(tl.sum(tl.exp(x - m[:, None]), axis=1))
    safe = tl.where(valid, tgt, 0)
    x_t = tl.load(logits_ptr + rows * n_cols + safe, mask=valid, other=0.0)  # gather by int64
    tl.store(loss_ptr + rows, tl.where(valid, lse - x_t, 0.0), mask=rmask)
    tl.atomic_add(count_ptr, tl.sum(valid.to(tl.int64), axis=0))  # int64 atomic


def cross_entropy_launch(n_rows: int = 24, n_cols: int = 40, block_r: int = 8,
                         block_c: int = 64, ignore_index: int = -100, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n_rows, n_cols), dtype=np.float32)
    target = rng.integers(0, n_cols, n_rows, dtype=np.int64)
    target[rng.random(n_rows) < 0.25] = ignore_index
    loss = np.zeros(n_rows, np.float32)
    count = np.full(1, 5, np.int64)

    def reference(logits_ptr: np.ndarray, target_ptr: np.ndarray, count_ptr: np.ndarray,
                  **_: np.ndarray) -> dict[str, np.ndarray]:
        x = logits_ptr.astype(np.float64)
        valid = target_ptr != ignore_index
        m = x.max(axis=1)
        lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
        picked = x[np.arange(n_rows), np.where(valid, target_ptr, 0)]
        return {"loss_ptr": np.where(valid, lse - picked, 0.0).astype(np.float32),
                "count_ptr": count_ptr + np.int64(valid.sum())}

    return Launch("triton-cross-entropy-int64", cross_entropy_kernel,
                  lambda meta: (triton.cdiv(n_rows, meta["BLOCK_R"]),),
                  (logits, target, loss, count, n_rows, n_cols, ignore_index),
                  {"BLOCK_R": block_r, "BLOCK_C": block_c}, reference)


# -- embedding by int64 ids ------------------------------------------------------------------
def embedding_launch(n_tokens: int = 37, vocab: int = 50, d: int = 32, block_t: int = 16,
                     seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, n_tokens, dtype=np.int64)  # torch's Long token ids
    table = rng.standard_normal((vocab, d), dtype=np.float32)
    out = np.zeros((n_tokens, d), np.float32)
    return Launch("triton-embedding-int64", embedding_kernel,
                  lambda meta: (triton.cdiv(n_tokens, meta["BLOCK_T"]),),
                  (ids, table, out, n_tokens), {"D": d, "BLOCK_T": block_t},
                  embedding_reference)


# -- a MoE GEMM's A rows: .to(tl.int64) of loaded token ids, then pointer arithmetic ---------
@triton.jit
def moe_rows_kernel(a_ptr, sorted_ids_ptr, out_ptr, num_valid, K: tl.constexpr,
                    top_k: tl.constexpr, BLOCK_M: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_token = tl.load(sorted_ids_ptr + offs).to(tl.int64)
    token_mask = offs_token < num_valid
    offs_k = tl.arange(0, K)
    a = tl.load(a_ptr + (offs_token[:, None] // top_k) * K + offs_k[None, :],
                mask=token_mask[:, None], other=0.0)
    tl.store(out_ptr + offs[:, None] * K + offs_k[None, :], a * 2.0)


def moe_rows_launch(n_tokens: int = 10, top_k: int = 2, k: int = 16, block_m: int = 8,
                    seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    num_valid = n_tokens * top_k
    n_slots = 3 * block_m  # vLLM pads each expert's block with num_valid
    ids = np.full(n_slots, num_valid, np.int32)
    ids[rng.choice(n_slots, num_valid, replace=False)] = rng.permutation(num_valid)
    a = rng.standard_normal((n_tokens, k), dtype=np.float32)
    out = np.zeros((n_slots, k), np.float32)

    def reference(a_ptr: np.ndarray, sorted_ids_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        ok = sorted_ids_ptr < num_valid
        rows = a_ptr[np.where(ok, sorted_ids_ptr, 0) // top_k] * np.float32(2.0)
        return {"out_ptr": np.where(ok[:, None], rows, np.float32(0.0))}

    return Launch("triton-moe-rows-int64", moe_rows_kernel,
                  lambda meta: (n_slots // meta["BLOCK_M"],),
                  (a, ids, out, num_valid), {"K": k, "top_k": top_k, "BLOCK_M": block_m},
                  reference)


# -- MoE routing: a histogram by int64 atomics at int64 offsets, and its prefix sum ----------
@triton.jit
def moe_histogram_kernel(topk_ids_ptr, score_ptr, hist_ptr, best_ptr, numel,
                         BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    ids = tl.load(topk_ids_ptr + offs, mask=mask, other=0)  # int64 expert ids
    tl.atomic_add(hist_ptr + ids, 1, mask=mask)  # int64 counters
    score = tl.load(score_ptr + offs, mask=mask, other=0)  # uint32
    tl.atomic_max(best_ptr + ids, score, mask=mask)  # unsigned maximum per expert


@triton.jit
def moe_align_kernel(topk_ids_ptr, counts_ptr, starts_ptr, sorted_ptr, numel, E: tl.constexpr,
                     BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    valid = offs < numel
    ids = tl.load(topk_ids_ptr + offs, mask=valid, other=E)  # E: no expert
    experts = tl.arange(0, E)
    hits = (ids[None, :] == experts[:, None]).to(tl.int32)  # [E, BLOCK] one-hot
    counts = tl.sum(hits, axis=1)
    tl.store(counts_ptr + experts, counts)
    ends = tl.cumsum(counts.to(tl.int64), axis=0)
    starts = ends - counts  # exclusive prefix sum, int64
    tl.store(starts_ptr + experts, starts)
    rank = tl.cumsum(hits, axis=1) - 1  # each token's place among its expert's tokens
    pos = tl.sum(hits * (starts[:, None] + rank), axis=0)  # int64 slot of each token
    tl.store(sorted_ptr + pos, offs, mask=valid)  # a scatter at int64 offsets


def moe_histogram_launch(numel: int = 45, n_experts: int = 8, block: int = 16,
                         seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, n_experts, numel, dtype=np.int64)
    score = rng.integers(0, 2**32, numel, dtype=np.uint32)
    hist = np.full(n_experts, 3, np.int64)
    best = np.full(n_experts, 2**31 + 5, np.uint32)

    def reference(topk_ids_ptr: np.ndarray, score_ptr: np.ndarray, hist_ptr: np.ndarray,
                  best_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        top = best_ptr.copy()
        np.maximum.at(top, topk_ids_ptr, score_ptr)
        return {"hist_ptr": hist_ptr + np.bincount(topk_ids_ptr, minlength=n_experts),
                "best_ptr": top}

    return Launch("triton-moe-histogram-int64", moe_histogram_kernel,
                  lambda meta: (triton.cdiv(numel, meta["BLOCK"]),),
                  (ids, score, hist, best, numel), {"BLOCK": block}, reference)


def moe_align_launch(numel: int = 45, n_experts: int = 8, block: int = 64,
                     seed: int = 1) -> Launch:
    ids = np.random.default_rng(seed).integers(0, n_experts, numel, dtype=np.int64)
    counts = np.zeros(n_experts, np.int32)
    starts = np.zeros(n_experts, np.int64)
    srt = np.full(numel, -1, np.int32)

    def reference(topk_ids_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        c = np.bincount(topk_ids_ptr, minlength=n_experts)
        return {"counts_ptr": c.astype(np.int32),
                "starts_ptr": (np.cumsum(c) - c).astype(np.int64),
                "sorted_ptr": np.argsort(topk_ids_ptr, kind="stable").astype(np.int32)}

    return Launch("triton-moe-align-int64", moe_align_kernel, (1,),
                  (ids, counts, starts, srt, numel), {"E": n_experts, "BLOCK": block},
                  reference)


# -- top-k / sort on uint32 keys made from float bits ------------------------------------------
@triton.jit
def topk_keys_kernel(x_ptr, keys_ptr, sorted_ptr, top_ptr, N: tl.constexpr, K: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, N)
    u = tl.load(x_ptr + row * N + offs).to(tl.uint32, bitcast=True)
    key = tl.where((u >> 31) == 1, u ^ 0xFFFFFFFF, u | 0x80000000)  # float order as uint32
    tl.store(keys_ptr + row * N + offs, key)
    tl.store(sorted_ptr + row * N + offs, tl.sort(key))
    tl.store(top_ptr + row * K + tl.arange(0, K), tl.topk(key, K))


def float_keys(x: np.ndarray) -> np.ndarray:
    """The radix-sort key of float32 values: uint32 in the floats' order."""
    u = x.view(np.uint32)
    return np.where(u >> 31 == 1, ~u, u | np.uint32(0x80000000)).astype(np.uint32)


def topk_keys_launch(rows: int = 2, n: int = 32, k: int = 8, seed: int = 0) -> Launch:
    x = np.random.default_rng(seed).standard_normal((rows, n), dtype=np.float32)
    keys = np.zeros((rows, n), np.uint32)
    srt = np.zeros((rows, n), np.uint32)
    top = np.zeros((rows, k), np.uint32)

    def reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        key = float_keys(x_ptr)
        s = np.sort(key, axis=-1)
        return {"keys_ptr": key, "sorted_ptr": s, "top_ptr": s[:, ::-1][:, :k].copy()}

    return Launch("triton-topk-uint32", topk_keys_kernel, (rows,), (x, keys, srt, top),
                  {"N": n, "K": k}, reference)


# -- offsets beyond int32: refused, never wrapped ---------------------------------------------
@triton.jit
def far_gather_kernel(x_ptr, idx_ptr, out_ptr, step, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs)  # int64 or uint32 element offsets, loaded
    tl.store(out_ptr + offs, tl.load(x_ptr + pid * step + idx))


def far_gather_launch(far: int = 0, dtype: str = "int64", step: int = 0, grid: int = 1,
                      n: int = 64, block: int = 8) -> Launch:
    """``idx[3] = far`` (when nonzero); program ``p`` reads ``p * step`` further on. The
    reference is what offsets wrapped to int32 (then numpy-style negative indices) would
    read: a replay that wrapped them would verify."""
    idx = (np.arange(block) * 5 % n).astype(dtype)
    if far:
        idx[3] = far
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(block, np.float32)

    def reference(x_ptr: np.ndarray, idx_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        return {"out_ptr": x_ptr[idx_ptr.astype(np.int64).astype(np.int32) % n]}

    return Launch("triton-far-gather", far_gather_kernel, (grid,), (x, idx, out, step),
                  {"BLOCK": block}, reference)


def far_gather_case(far: int = 0, dtype: str = "int64", step: int = 0, grid: int = 1,
                    n: int = 64, block: int = 8):
    return far_gather_launch(far, dtype, step, grid, n, block).case()


# -- Triton's fixed-width integer arithmetic on loaded data ----------------------------------
@triton.jit
def wide_kernel(a_ptr, y_ptr, b_ptr, d_ptr, c_ptr, s_ptr, o64_ptr, o32_ptr, i32_ptr, o8_ptr,
                o16_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)  # int64 around +-2**62
    y = tl.load(y_ptr + offs)  # int64 divisors of both signs
    b = tl.load(b_ptr + offs)  # uint32, half with the top bit set
    dv = tl.load(d_ptr + offs)  # uint32 divisors
    c = tl.load(c_ptr + offs)  # uint8
    s = tl.load(s_ptr + offs)  # int16
    tl.store(o64_ptr + 0 * BLOCK + offs, a * 5)  # wraps around 2**64
    tl.store(o64_ptr + 1 * BLOCK + offs, a // y)  # C: toward zero
    tl.store(o64_ptr + 2 * BLOCK + offs, a % y)  # the dividend's sign
    tl.store(o64_ptr + 3 * BLOCK + offs, a >> 7)  # arithmetic shift
    tl.store(o64_ptr + 4 * BLOCK + offs, a << 3)  # wraps
    tl.store(o64_ptr + 5 * BLOCK + offs, (a > y).to(tl.int64))
    tl.store(o64_ptr + 6 * BLOCK + offs, b + a)  # uint32 + int64 -> int64
    tl.store(o64_ptr + 7 * BLOCK + offs, b.to(tl.int64) * b)  # exact in int64
    tl.store(o32_ptr + 0 * BLOCK + offs, b * b)  # wraps around 2**32
    tl.store(o32_ptr + 1 * BLOCK + offs, b >> 5)  # logical shift
    tl.store(o32_ptr + 2 * BLOCK + offs, b // dv)
    tl.store(o32_ptr + 3 * BLOCK + offs, b % dv)
    tl.store(o32_ptr + 4 * BLOCK + offs, (b > dv).to(tl.uint32))  # unsigned comparison
    tl.store(o32_ptr + 5 * BLOCK + offs, a.to(tl.uint32))  # truncates to the low 32 bits
    tl.store(o32_ptr + 6 * BLOCK + offs, b ^ (b << 13))
    tl.store(i32_ptr + 0 * BLOCK + offs, b.to(tl.int32))  # wraps to negative
    tl.store(i32_ptr + 1 * BLOCK + offs, b.to(tl.int32, bitcast=True))
    tl.store(i32_ptr + 2 * BLOCK + offs, (a >> 40).to(tl.int32))
    tl.store(o8_ptr + 0 * BLOCK + offs, c + c)  # wraps around 256
    tl.store(o8_ptr + 1 * BLOCK + offs, c * 3)
    tl.store(o8_ptr + 2 * BLOCK + offs, c >> 1)
    tl.store(o16_ptr + 0 * BLOCK + offs, s * s)  # wraps around 2**16
    tl.store(o16_ptr + 1 * BLOCK + offs, s // 3)
    tl.store(o16_ptr + 2 * BLOCK + offs, c.to(tl.int16) - s)
    tl.store(o16_ptr + 3 * BLOCK + offs, s.to(tl.float16, bitcast=True).to(tl.int16, bitcast=True))


def _wrap(x: np.ndarray, dt: type) -> np.ndarray:
    """Exact Python-integer values reduced modulo 2**bits into ``dt`` (two's complement)."""
    bits = np.dtype(dt).itemsize * 8
    v = np.array([int(t) % (1 << bits) for t in np.asarray(x).reshape(-1)], dtype=np.uint64)
    return v.astype(dt)


def _pairs(f, xs: list[int], ys: list[int]) -> list[int]:
    return [f(x, y) for x, y in zip(xs, ys, strict=True)]


def _cdivmod(a: np.ndarray, b: np.ndarray) -> tuple[list[int], list[int]]:
    """C's quotient (toward zero) and remainder (x == q * y + r), in Python integers."""
    ai, bi = [int(x) for x in a], [int(y) for y in b]
    q = _pairs(lambda x, y: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1), ai, bi)
    return q, [x - qq * y for x, y, qq in zip(ai, bi, q, strict=True)]


def wide_launch(block: int = 16, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    a = rng.integers(-2**62, 2**62, block, dtype=np.int64)
    y = rng.choice(np.array([-2**40 - 7, -3, -1, 2, 7, 2**33 + 1], np.int64), block)
    b = rng.integers(0, 2**32, block, dtype=np.uint32)
    b[: block // 2] |= np.uint32(0x80000000)
    dv = rng.integers(1, 2**32, block, dtype=np.uint32)
    c = rng.integers(0, 256, block, dtype=np.uint8)
    s = rng.integers(-2**15, 2**15, block, dtype=np.int16)
    outs = (np.zeros((8, block), np.int64), np.zeros((7, block), np.uint32),
            np.zeros((3, block), np.int32), np.zeros((3, block), np.uint8),
            np.zeros((4, block), np.int16))

    def reference(a_ptr: np.ndarray, y_ptr: np.ndarray, b_ptr: np.ndarray, d_ptr: np.ndarray,
                  c_ptr: np.ndarray, s_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        ai, yi, bi, di = ([int(v) for v in x] for x in (a_ptr, y_ptr, b_ptr, d_ptr))
        ci, si = ([int(v) for v in x] for x in (c_ptr, s_ptr))
        q, r = _cdivmod(a_ptr, y_ptr)
        o64 = [[x * 5 for x in ai], q, r, [x >> 7 for x in ai], [x << 3 for x in ai],
               _pairs(lambda x, v: int(x > v), ai, yi), _pairs(lambda x, v: x + v, bi, ai),
               [x * x for x in bi]]
        o32 = [[x * x for x in bi], [x >> 5 for x in bi], _pairs(lambda x, v: x // v, bi, di),
               _pairs(lambda x, v: x % v, bi, di), _pairs(lambda x, v: int(x > v), bi, di), ai,
               [x ^ (x << 13) for x in bi]]
        i32 = [bi, bi, [x >> 40 for x in ai]]
        o8 = [[x + x for x in ci], [x * 3 for x in ci], [x >> 1 for x in ci]]
        o16 = [[x * x for x in si], _cdivmod(s_ptr, np.full(block, 3))[0],
               _pairs(lambda x, v: x - v, ci, si), si]
        return {name: np.stack([_wrap(np.array(row, dtype=object), dt) for row in rows])
                for name, rows, dt in (("o64_ptr", o64, np.int64), ("o32_ptr", o32, np.uint32),
                                       ("i32_ptr", i32, np.int32), ("o8_ptr", o8, np.uint8),
                                       ("o16_ptr", o16, np.int16))}

    return Launch("triton-wide-integers", wide_kernel, (1,), (a, y, b, dv, c, s, *outs),
                  {"BLOCK": block}, reference)


def cross_entropy_case(n_rows: int = 24, n_cols: int = 40, block_r: int = 8,
                       block_c: int = 64, ignore_index: int = -100, seed: int = 0):
    return cross_entropy_launch(n_rows, n_cols, block_r, block_c, ignore_index, seed).case()


def embedding_case(n_tokens: int = 37, vocab: int = 50, d: int = 32, block_t: int = 16,
                   seed: int = 0):
    return embedding_launch(n_tokens, vocab, d, block_t, seed).case()


def moe_rows_case(n_tokens: int = 10, top_k: int = 2, k: int = 16, block_m: int = 8,
                  seed: int = 0):
    return moe_rows_launch(n_tokens, top_k, k, block_m, seed).case()


def moe_histogram_case(numel: int = 45, n_experts: int = 8, block: int = 16, seed: int = 0):
    return moe_histogram_launch(numel, n_experts, block, seed).case()


def moe_align_case(numel: int = 45, n_experts: int = 8, block: int = 64, seed: int = 1):
    return moe_align_launch(numel, n_experts, block, seed).case()


def topk_keys_case(rows: int = 2, n: int = 32, k: int = 8, seed: int = 0):
    return topk_keys_launch(rows, n, k, seed).case()


def wide_case(block: int = 16, seed: int = 0):
    return wide_launch(block, seed).case()
