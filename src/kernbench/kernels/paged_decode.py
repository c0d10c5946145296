"""A paged, split-KV GQA decode written the way LLM-serving engines write it in Triton
(docs/attention-designs.md, ADR-0842): each request's length comes from ``kv_indptr``, its
K/V pages from a page table (page by page, FlashInfer's HND layout: a page of one KV head is
contiguous), the splits of a request run as separate programs over bounds computed from the
loaded length, an empty split is skipped (``if split_end > split_start``), and the split
reduction — serving engines' second kernel — runs in the program that finishes a (request,
KV head)'s last split, which it learns from an acq_rel ticket.

Every one of those is a decision on data: a ``guard`` row (ADR-0840). The module imports
``triton`` (the installed package, or kernbench's stand-in), so it is loaded only when the
case is built (``kernels/serving.py`` registers it).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import kernbench as kb
from kernbench.case import references
from kernbench.case.triton_hook import install
from kernbench.triton import case as triton_case

install()  # the kernels below are Triton source: the stand-in where no triton is installed
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _merge_splits(Mid_O, Mid_LSE, Out, cur_batch, cur_kv_head, seq_len,
                  H_Q: tl.constexpr, GROUP: tl.constexpr, BLOCK_G: tl.constexpr,
                  HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr, NUM_SPLITS: tl.constexpr):
    """The split reduction (a serving engine's ``_fwd_kernel_stage2``): the splits' partial
    outputs merged by their log-sum-exp."""
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_g = offs_g < GROUP
    heads = cur_kv_head * GROUP + offs_g
    num_pages = tl.cdiv(seq_len, PAGE_SIZE)
    pages_per_split = tl.cdiv(num_pages, NUM_SPLITS)
    e_sum = tl.zeros([BLOCK_G], tl.float32)
    e_max = tl.full([BLOCK_G], float("-inf"), tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    for split_id in range(0, NUM_SPLITS):
        split_start = split_id * pages_per_split
        split_end = tl.minimum(split_start + pages_per_split, num_pages)
        if split_end > split_start:
            row = (cur_batch * H_Q + heads) * NUM_SPLITS + split_id
            tv = tl.load(Mid_O + row[:, None] * HEAD_DIM + offs_d[None, :],
                         mask=mask_g[:, None], other=0.0)
            tlogic = tl.load(Mid_LSE + row, mask=mask_g, other=float("-inf"))
            n_e_max = tl.maximum(tlogic, e_max)
            old_scale = tl.exp(e_max - n_e_max)
            acc *= old_scale[:, None]
            exp_logic = tl.exp(tlogic - n_e_max)
            acc += exp_logic[:, None] * tv
            e_sum = e_sum * old_scale + exp_logic
            e_max = n_e_max
    out = acc / e_sum[:, None]
    tl.store(Out + (cur_batch * H_Q + heads)[:, None] * HEAD_DIM + offs_d[None, :],
             out.to(Out.dtype.element_ty), mask=mask_g[:, None])


@triton.jit
def _split_partial(Q, K_cache, V_cache, page_table, Mid_O, Mid_LSE, sm_scale, max_pages,
                   cur_batch, cur_kv_head, split_id, seq_len,
                   H_Q: tl.constexpr, H_KV: tl.constexpr, GROUP: tl.constexpr,
                   BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
                   NUM_SPLITS: tl.constexpr):
    """One split of one request's pages (a serving engine's ``_fwd_kernel_stage1``): the
    GROUP query heads of the KV head (padded to BLOCK_G rows for ``tl.dot``) against the
    split's pages, online softmax; its partial output and log-sum-exp to Mid_O, Mid_LSE."""
    num_pages = tl.cdiv(seq_len, PAGE_SIZE)
    pages_per_split = tl.cdiv(num_pages, NUM_SPLITS)
    split_start = split_id * pages_per_split
    split_end = tl.minimum(split_start + pages_per_split, num_pages)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_p = tl.arange(0, PAGE_SIZE)
    mask_g = offs_g < GROUP
    heads = cur_kv_head * GROUP + offs_g
    if split_end > split_start:
        q = tl.load(Q + (cur_batch * H_Q + heads)[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=mask_g[:, None], other=0.0)
        e_max = tl.full([BLOCK_G], float("-inf"), tl.float32)
        e_sum = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
        for p in range(split_start, split_end):
            page = tl.load(page_table + cur_batch * max_pages + p)
            kv_base = (page * H_KV + cur_kv_head) * PAGE_SIZE * HEAD_DIM
            tile = offs_p[:, None] * HEAD_DIM + offs_d[None, :]
            k = tl.load(K_cache + kv_base + tile)
            v = tl.load(V_cache + kv_base + tile)
            qk = tl.dot(q, tl.trans(k)) * sm_scale
            qk = tl.where((p * PAGE_SIZE + offs_p)[None, :] < seq_len, qk, float("-inf"))
            n_e_max = tl.maximum(tl.max(qk, 1), e_max)
            re_scale = tl.exp(e_max - n_e_max)
            pexp = tl.exp(qk - n_e_max[:, None])
            acc *= re_scale[:, None]
            acc += tl.dot(pexp.to(v.dtype), v)
            e_sum = e_sum * re_scale + tl.sum(pexp, 1)
            e_max = n_e_max
        row = (cur_batch * H_Q + heads) * NUM_SPLITS + split_id
        tl.store(Mid_O + row[:, None] * HEAD_DIM + offs_d[None, :], acc / e_sum[:, None],
                 mask=mask_g[:, None])
        tl.store(Mid_LSE + row, e_max + tl.log(e_sum), mask=mask_g)


@triton.jit
def paged_decode_kernel(Q, K_cache, V_cache, page_table, kv_indptr, Mid_O, Mid_LSE, Ticket,
                        Out, sm_scale, max_pages,
                        H_Q: tl.constexpr, H_KV: tl.constexpr, GROUP: tl.constexpr,
                        BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr,
                        PAGE_SIZE: tl.constexpr, NUM_SPLITS: tl.constexpr):
    """One program per (request, KV head, split): the request's length from ``kv_indptr``,
    its split of the pages, then — in the program that finishes the last split of its
    (request, KV head) — the merge of every split."""
    cur_batch = tl.program_id(0)
    cur_kv_head = tl.program_id(1)
    split_id = tl.program_id(2)
    seq_len = tl.load(kv_indptr + cur_batch + 1) - tl.load(kv_indptr + cur_batch)
    _split_partial(Q, K_cache, V_cache, page_table, Mid_O, Mid_LSE, sm_scale, max_pages,
                   cur_batch, cur_kv_head, split_id, seq_len, H_Q, H_KV, GROUP, BLOCK_G,
                   HEAD_DIM, PAGE_SIZE, NUM_SPLITS)
    # stage 2, folded: the program that finishes the request's last split merges them
    done = tl.atomic_add(Ticket + cur_batch * H_KV + cur_kv_head, 1)
    if done == NUM_SPLITS - 1:
        _merge_splits(Mid_O, Mid_LSE, Out, cur_batch, cur_kv_head, seq_len, H_Q, GROUP,
                      BLOCK_G, HEAD_DIM, PAGE_SIZE, NUM_SPLITS)


def lengths(batch: int, s_max: int, seed: int, even: bool = False) -> np.ndarray:
    """Uneven request lengths up to ``s_max``: the first request is ``s_max`` long, the
    others drawn from ``[1, s_max]`` (``even``: every request ``s_max`` long)."""
    lens = np.random.default_rng(seed).integers(1, s_max + 1, batch)
    if even:
        lens[:] = s_max
    lens[0] = s_max
    return lens.astype(np.int32)


def arrays(lens: np.ndarray, h_kv: int, d: int, page: int, seed: int
           ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(kv_indptr, page table, pages in the cache, pages per request at most): every
    request's pages scattered over the cache by a permutation (a paged allocator's order)."""
    pages = -(-lens // page)
    max_pages = int(pages.max())
    n_pages = int(pages.sum()) + 1  # one page no request owns
    order = np.random.default_rng(seed + 1).permutation(n_pages)
    table = np.zeros((len(lens), max_pages), np.int32)
    at = 0
    for r, n in enumerate(pages.tolist()):
        table[r, :n] = order[at:at + n]
        at += n
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    return indptr, table, n_pages, max_pages


def case(batch: int, s_max: int, h_q: int, h_kv: int, d: int, page: int, splits: int,
         dtype: str, seed: int, even: bool = False) -> kb.Case:
    """The launch as a ``kb.Case``: q, K and V made by ``kb.randn`` (regenerated, not
    stored), the lengths, page table, partial results and tickets stored."""
    lens = lengths(batch, s_max, seed, even)
    indptr, table, n_pages, max_pages = arrays(lens, h_kv, d, page, seed)
    group = h_q // h_kv
    block_g = max(16, 1 << (group - 1).bit_length())
    placeholder = np.float16  # the shapes: the big inputs' specs are replaced below
    q = np.empty((batch, h_q, d), placeholder)
    kc = np.empty((n_pages, h_kv, page, d), placeholder)
    vc = np.empty((n_pages, h_kv, page, d), placeholder)
    mid_o = np.zeros((batch, h_q, splits, d), np.float32)
    mid_lse = np.zeros((batch, h_q, splits), np.float32)
    ticket = np.zeros((batch, h_kv), np.int32)
    out = np.empty((batch, h_q, d), placeholder)

    c = triton_case(paged_decode_kernel, (batch, h_kv, splits), q, kc, vc, table, indptr,
                    mid_o, mid_lse, ticket, out, 1.0 / float(np.sqrt(d)), max_pages,
                    name="serving-decode", outputs=["Out"],
                    reference=references.serving_decode(page), H_Q=h_q, H_KV=h_kv,
                    GROUP=group, BLOCK_G=block_g, HEAD_DIM=d, PAGE_SIZE=page,
                    NUM_SPLITS=splits)
    big = {"Q": (q.shape, 61), "K_cache": (kc.shape, 62), "V_cache": (vc.shape, 63)}
    tensors = dict(c.tensors)
    for name, (shape, s) in big.items():
        tensors[name] = kb.tensor(shape, dtype, init=kb.randn(seed=seed + s))
    tensors["Out"] = kb.tensor(out.shape, dtype, role="output")
    return replace(c, tensors=tensors)
