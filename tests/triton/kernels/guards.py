"""Kernels whose control flow depends on loaded data (ADR-0840, issue 38), in the style of
the public libraries: per-request lengths read from memory (early ``return`` on an empty
request, ``range`` bounds from them), a page table read page by page, a ``while`` on data,
Liger-Kernel's cross-entropy with ``ignore_index`` (an ``if`` on the label, an early
``return``, the label as a pointer offset, in-place gradients read back) and its JSD with
labels, and a spin lock on ``tl.atomic_cas`` around a critical section."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


# -- varlen: lengths and starts from memory ---------------------------------------------------
@triton.jit
def varlen_sum_kernel(x_ptr, lens_ptr, starts_ptr, out_ptr, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    n = tl.load(lens_ptr + b)
    start = tl.load(starts_ptr + b)
    if n == 0:
        tl.store(out_ptr + b, 0.0)
        return
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, n, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + start + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + b, tl.sum(acc, axis=0))


def varlen_launch(lens: tuple[int, ...] = (5, 0, 37, 16, 1), block: int = 16,
                  seed: int = 0) -> Launch:
    n = np.array(lens, np.int32)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int32)
    x = np.random.default_rng(seed).integers(-9, 10, int(n.sum()) + 3).astype(np.float32)

    def reference(x_ptr: np.ndarray, lens_ptr: np.ndarray, starts_ptr: np.ndarray,
                  **_: np.ndarray) -> dict[str, np.ndarray]:
        return {"out_ptr": np.array([x_ptr[s:s + k].sum() for s, k in
                                     zip(starts_ptr, lens_ptr, strict=True)], np.float32)}

    return Launch("triton-varlen-sum", varlen_sum_kernel, (len(n),),
                  (x, n, starts, np.full(len(n), -1.0, np.float32)), {"BLOCK": block},
                  reference, outputs=("out_ptr",))


def varlen_case(lens: tuple[int, ...] = (5, 0, 37, 16, 1), block: int = 16, seed: int = 0):
    return varlen_launch(lens, block, seed).case()


# -- a page table read page by page -------------------------------------------------------
@triton.jit
def paged_sum_kernel(k_cache_ptr, page_table_ptr, lens_ptr, out_ptr, max_pages,
                     PAGE: tl.constexpr, D: tl.constexpr):
    r = tl.program_id(0)
    n = tl.load(lens_ptr + r)
    offs_p = tl.arange(0, PAGE)
    offs_d = tl.arange(0, D)
    acc = tl.zeros((D,), tl.float32)
    for p in range(0, tl.cdiv(n, PAGE)):
        page = tl.load(page_table_ptr + r * max_pages + p)
        rows = p * PAGE + offs_p
        k = tl.load(k_cache_ptr + (page * PAGE + offs_p)[:, None] * D + offs_d[None, :],
                    mask=(rows < n)[:, None], other=0.0)
        acc += tl.sum(k, axis=0)
    tl.store(out_ptr + r * D + offs_d, acc)


def paged_launch(lens: tuple[int, ...] = (21, 8, 0, 33), page: int = 8, d: int = 16,
                 seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    n = np.array(lens, np.int32)
    max_pages = int(max(-(-int(x) // page) for x in n)) or 1
    n_pages = len(n) * max_pages + 2
    cache = rng.integers(-4, 5, (n_pages * page, d)).astype(np.float32)
    table = rng.permutation(n_pages)[:len(n) * max_pages].reshape(len(n), max_pages)
    table = table.astype(np.int32)

    def reference(k_cache_ptr: np.ndarray, page_table_ptr: np.ndarray, lens_ptr: np.ndarray,
                  **_: np.ndarray) -> dict[str, np.ndarray]:
        out = np.zeros((len(lens_ptr), d), np.float32)
        for r, k in enumerate(lens_ptr):
            toks = [page_table_ptr[r, t // page] * page + t % page for t in range(int(k))]
            out[r] = k_cache_ptr[toks].sum(axis=0) if toks else 0.0
        return {"out_ptr": out}

    return Launch("triton-paged-sum", paged_sum_kernel, (len(n),),
                  (cache, table, n, np.zeros((len(n), d), np.float32), max_pages),
                  {"PAGE": page, "D": d}, reference, outputs=("out_ptr",))


def paged_case(lens: tuple[int, ...] = (21, 8, 0, 33), page: int = 8, d: int = 16,
               seed: int = 0):
    return paged_launch(lens, page, d, seed).case()


# -- a while on data ----------------------------------------------------------------------
@triton.jit
def halve_kernel(x_ptr, y_ptr, steps_ptr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    k = 0
    while v > 1.0:
        v = v * 0.5
        k += 1
    tl.store(y_ptr + pid, v)
    tl.store(steps_ptr + pid, k)


def halve_launch() -> Launch:
    x = np.array([0.5, 3.0, 17.0, 1.0, 1000.0, 2.0], np.float32)

    def reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        k = np.maximum(np.ceil(np.log2(np.maximum(x_ptr, 1.0))), 0).astype(np.int32)
        return {"y_ptr": (x_ptr / 2.0 ** k).astype(np.float32), "steps_ptr": k}

    return Launch("triton-halve", halve_kernel, (len(x),),
                  (x, np.zeros_like(x), np.zeros(len(x), np.int32)), {}, reference)


def halve_case():
    return halve_launch().case()


# -- Liger-Kernel's cross-entropy: ignore_index, early return, in-place gradients -------------
@triton.jit
def liger_cross_entropy_kernel(X_ptr, X_stride, Y_ptr, Y_stride, loss_ptr, loss_stride,
                               n_cols, n_non_ignore, ignore_index, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    Y_ptr += program_id * Y_stride
    y = tl.load(Y_ptr)
    X_ptr += program_id * X_stride
    if y == ignore_index:  # the row has no loss; its gradient is zero
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + X_offsets, 0.0, mask=X_offsets < n_cols)
        return
    loss_ptr += program_id * loss_stride
    m = float("-inf")
    d = 0.0
    ori_X_y = tl.load(X_ptr + y)
    for i in range(0, n_cols, BLOCK_SIZE):  # online softmax: max and normaliser
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf"))
        block_max = tl.max(X_block)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
        m = m_new
    lse = m + tl.log(d)
    for i in range(0, n_cols, BLOCK_SIZE):  # the gradient, in place of the logits
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf"))
        X_block = (tl.exp(X_block - m) / d) / n_non_ignore
        tl.store(X_ptr + X_offsets, X_block, mask=X_offsets < n_cols)
    tl.debug_barrier()
    loss = lse - ori_X_y
    X_y = tl.load(X_ptr + y)  # reads back the gradient just stored
    tl.store(X_ptr + y, X_y - 1.0 / n_non_ignore)
    tl.store(loss_ptr, loss / n_non_ignore)


def cross_entropy_launch(n_rows: int = 6, n_cols: int = 50, block: int = 32,
                         ignore_index: int = -100, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n_rows, n_cols), dtype=np.float32)
    target = rng.integers(0, n_cols, n_rows, dtype=np.int64)
    target[[1, 4]] = ignore_index
    n_non_ignore = int((target != ignore_index).sum())

    def reference(X_ptr: np.ndarray, Y_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        x = X_ptr.astype(np.float64)
        valid = Y_ptr != ignore_index
        lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
        picked = x[np.arange(n_rows), np.where(valid, Y_ptr, 0)]
        grad = np.exp(x - lse[:, None]) / n_non_ignore
        grad[np.arange(n_rows), np.where(valid, Y_ptr, 0)] -= 1.0 / n_non_ignore
        return {"loss_ptr": np.where(valid, (lse - picked) / n_non_ignore, 0).astype(np.float32),
                "X_ptr": np.where(valid[:, None], grad, 0).astype(np.float32)}

    return Launch("triton-liger-cross-entropy", liger_cross_entropy_kernel, (n_rows,),
                  (logits, n_cols, target, 1, np.zeros(n_rows, np.float32), 1, n_cols,
                   n_non_ignore, ignore_index), {"BLOCK_SIZE": block}, reference,
                  outputs=("X_ptr", "loss_ptr"))


def cross_entropy_case(n_rows: int = 6, n_cols: int = 50, block: int = 32,
                       ignore_index: int = -100, seed: int = 0):
    return cross_entropy_launch(n_rows, n_cols, block, ignore_index, seed).case()


# -- Liger-Kernel's JSD with labels: an if on the label, an early return ---------------------
@triton.jit
def liger_jsd_kernel(X_ptr, X_stride, Y_ptr, Y_stride, loss_ptr, loss_stride, dX_ptr,
                     dX_stride, label_ptr, beta: tl.constexpr, n_non_ignore: int,
                     ignore_index: tl.constexpr, n_cols, BLOCK_SIZE: tl.constexpr,
                     HAS_LABEL: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    X_ptr += pid * X_stride
    dX_ptr += pid * dX_stride
    Y_ptr += pid * Y_stride
    loss_ptr += pid * loss_stride
    label_ptr += pid
    if HAS_LABEL:
        label = tl.load(label_ptr)
        if label == ignore_index:
            for i in range(0, n_cols, BLOCK_SIZE):
                offsets = i + tl.arange(0, BLOCK_SIZE)
                tl.store(dX_ptr + offsets, 0.0, mask=offsets < n_cols)
            return
    for i in range(0, n_cols, BLOCK_SIZE):
        offsets = i + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_cols
        X = tl.load(X_ptr + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        Y = tl.load(Y_ptr + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        Q = tl.exp(X)
        P = tl.exp(Y)
        M = beta * P + (1 - beta) * Q
        log_M = tl.log(M)
        loss = beta * P * Y + (1 - beta) * Q * X - M * log_M
        dX = (1 - beta) * Q * (X - log_M)
        loss = loss / n_non_ignore
        dX = dX / n_non_ignore
        tl.store(loss_ptr + offsets, loss, mask=mask)
        tl.store(dX_ptr + offsets, dX, mask=mask)


def jsd_launch(n_rows: int = 5, n_cols: int = 40, block: int = 16, beta: float = 0.5,
               ignore_index: int = -100, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)

    def log_softmax(z: np.ndarray) -> np.ndarray:
        return (z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
                - z.max(1, keepdims=True)).astype(np.float32)

    x = log_softmax(rng.standard_normal((n_rows, n_cols)))
    y = log_softmax(rng.standard_normal((n_rows, n_cols)))
    label = rng.integers(0, 3, n_rows, dtype=np.int64)
    label[2] = ignore_index
    n_non_ignore = int((label != ignore_index).sum())

    def reference(X_ptr: np.ndarray, Y_ptr: np.ndarray, label_ptr: np.ndarray,
                  **_: np.ndarray) -> dict[str, np.ndarray]:
        xs, ys = X_ptr.astype(np.float64), Y_ptr.astype(np.float64)
        q, p = np.exp(xs), np.exp(ys)
        m = beta * p + (1 - beta) * q
        loss = (beta * p * ys + (1 - beta) * q * xs - m * np.log(m)) / n_non_ignore
        dx = (1 - beta) * q * (xs - np.log(m)) / n_non_ignore
        keep = (label_ptr != ignore_index)[:, None]
        return {"loss_ptr": np.where(keep, loss, 0).astype(np.float32),
                "dX_ptr": np.where(keep, dx, 0).astype(np.float32)}

    return Launch("triton-liger-jsd", liger_jsd_kernel, (n_rows,),
                  (x, n_cols, y, n_cols, np.zeros((n_rows, n_cols), np.float32), n_cols,
                   np.zeros((n_rows, n_cols), np.float32), n_cols, label),
                  {"beta": beta, "n_non_ignore": n_non_ignore, "ignore_index": ignore_index,
                   "n_cols": n_cols, "BLOCK_SIZE": block, "HAS_LABEL": True}, reference,
                  outputs=("loss_ptr", "dX_ptr"))


def jsd_case(n_rows: int = 5, n_cols: int = 40, block: int = 16, beta: float = 0.5,
             ignore_index: int = -100, seed: int = 0):
    return jsd_launch(n_rows, n_cols, block, beta, ignore_index, seed).case()


# -- a spin lock on atomic_cas around a critical section -----------------------------------
@triton.jit
def locked_sum_kernel(lock_ptr, total_ptr, x_ptr, count_ptr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(total_ptr, tl.load(total_ptr) + v)  # the critical section: one at a time
    tl.store(count_ptr, tl.load(count_ptr) + 1)
    tl.atomic_xchg(lock_ptr, 0)


def locked_launch(programs: int = 12, seed: int = 0) -> Launch:
    x = np.random.default_rng(seed).integers(1, 100, programs).astype(np.int32)

    def reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        return {"lock_ptr": np.zeros(1, np.int32),
                "total_ptr": x_ptr.sum(keepdims=True, dtype=np.int32),
                "count_ptr": np.array([programs], np.int32)}

    return Launch("triton-locked-sum", locked_sum_kernel, (programs,),
                  (np.zeros(1, np.int32), np.zeros(1, np.int32), x, np.zeros(1, np.int32)),
                  {}, reference, outputs=("lock_ptr", "total_ptr", "count_ptr"))


def locked_case(programs: int = 12, seed: int = 0):
    return locked_launch(programs, seed).case()


# -- the library's serving decode, as Triton runs it (fp16: the interpreter's bf16 dot is off)
def serving_launch(batch: int = 3, s_max: int = 70, h_q: int = 16, h_kv: int = 2, d: int = 16,
                   page: int = 16, splits: int = 3, seed: int = 0) -> Launch:
    from kernbench.case.references import paged_decode_reference
    from kernbench.kernels import paged_decode as pd

    lens = pd.lengths(batch, s_max, seed)
    indptr, table, n_pages, max_pages = pd.arrays(lens, h_kv, d, page, seed)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, h_q, d)).astype(np.float16)
    kc = rng.standard_normal((n_pages, h_kv, page, d)).astype(np.float16)
    vc = rng.standard_normal((n_pages, h_kv, page, d)).astype(np.float16)
    group = h_q // h_kv

    def reference(Q: np.ndarray, K_cache: np.ndarray, V_cache: np.ndarray,  # noqa: N803
                  page_table: np.ndarray, kv_indptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        return {"Out": paged_decode_reference(Q, K_cache, V_cache, page_table, kv_indptr,
                                              page).astype(np.float16)}

    return Launch("serving-decode-fp16", pd.paged_decode_kernel, (batch, h_kv, splits),
                  (q, kc, vc, table, indptr, np.zeros((batch, h_q, splits, d), np.float32),
                   np.zeros((batch, h_q, splits), np.float32), np.zeros((batch, h_kv), np.int32),
                   np.zeros((batch, h_q, d), np.float16), 1.0 / float(np.sqrt(d)), max_pages),
                  {"H_Q": h_q, "H_KV": h_kv, "GROUP": group, "BLOCK_G": max(16, group),
                   "HEAD_DIM": d, "PAGE_SIZE": page, "NUM_SPLITS": splits}, reference,
                  outputs=("Out",))


def serving_case(batch: int = 3, s_max: int = 70, h_q: int = 16, h_kv: int = 2, d: int = 16,
                 page: int = 16, splits: int = 3, seed: int = 0):
    return serving_launch(batch, s_max, h_q, h_kv, d, page, splits, seed).case()
