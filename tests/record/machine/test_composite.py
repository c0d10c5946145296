"""Composite GEMM: a parent row plus one dma_read and one dot child per streamed tile."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench import tl
from tests.conftest import rows


@kb.kernel
def qk(q, k, *, n: int, tile: int, trans_b: bool):
    a = tl.load(q, (8, 128), tl.bfloat16)
    shape = (n, 128) if trans_b else (128, n)
    tl.composite(op="gemm", a=a, b=tl.ref(k, shape, tl.bfloat16), trans_b=trans_b,
                 tile=tile or None)


def _trace(rec, n, tile, trans_b=True):
    return rec(qk, {"q": kb.tensor((8, 128), "bfloat16"), "k": kb.tensor((n * 128,), "bfloat16")},
               params={"n": n, "tile": tile, "trans_b": trans_b})


@pytest.mark.parametrize("n,tile,tiles", [(512, 128, 4), (512, 100, 6), (1024, 0, 1),
                                          (4096, 0, 4)])
def test_child_dma_read_count_equals_the_streamed_tiles(rec, n, tile, tiles):
    trace = _trace(rec, n, tile)
    (parent,) = rows(trace, "gemm")
    assert parent["kind"] == "composite" and parent["engine"] == "none"
    kids = [r for r in rows(trace) if r["parent"] == parent["op_id"]]
    assert [r["name"] for r in kids] == ["dma_read", "dot"] * tiles
    assert sum(r["nbytes"] for r in kids if r["name"] == "dma_read") == n * 128 * 2
    assert all(r["inputs"][0]["space"] == "hbm" and r["output"]["space"] == "stage"
               for r in kids if r["name"] == "dma_read")
    assert parent["t_end_ps"] == max(r["t_end_ps"] for r in kids)


def test_dma_of_tile_i_plus_1_overlaps_the_gemm_of_tile_i(rec):
    trace = _trace(rec, 2048, 256)
    kids = [r for r in rows(trace) if r["parent"] is not None]
    dmas = [r for r in kids if r["name"] == "dma_read"]
    dots = [r for r in kids if r["name"] == "dot"]
    for i in range(len(dots) - 1):
        nxt = dmas[i + 1]
        assert nxt["t_start_ps"] < dots[i]["t_end_ps"]  # the next DMA runs ...
        assert nxt["t_start_ps"] + nxt["busy_ps"] > dots[i]["t_start_ps"]  # ... during GEMM i
        assert dots[i]["t_start_ps"] >= dmas[i]["t_end_ps"]  # GEMM i waits for its own tile
    for i in range(2, len(dmas)):  # double buffering: tile i reuses the slot of tile i-2
        assert dmas[i]["output"]["addr"] == dmas[i - 2]["output"]["addr"]
        assert dmas[i]["t_start_ps"] >= dots[i - 2]["t_end_ps"]


def test_k_split_children_accumulate_into_the_result(rec):
    @kb.kernel
    def pv(p, v):
        a = tl.load(p, (8, 512), tl.bfloat16)
        tl.composite(op="gemm", a=a, b=tl.ref(v, (512, 128), tl.bfloat16), tile=128)

    trace = rec(pv, {"p": kb.tensor((8, 512), "bfloat16"), "v": kb.tensor((512, 128), "bfloat16")})
    dots = rows(trace, "dot")
    assert [r["attrs"] for r in dots] == [f'{{"a_cols":[{k},{k + 128}]}}' for k in
                                          range(0, 512, 128)]
    assert len(dots[0]["inputs"]) == 2 and all(len(d["inputs"]) == 3 for d in dots[1:])
    assert all(d["output"]["shape"] == [8, 128] for d in dots)
    assert all(d["busy_ps"] == (1 * 1 * 128 + 32) * 1000 for d in dots)


def test_composite_shape_mismatch_is_a_kernel_error(rec):
    @kb.kernel
    def bad(q, k):
        a = tl.load(q, (8, 64), tl.bfloat16)
        tl.composite(op="gemm", a=a, b=tl.ref(k, (256, 128), tl.bfloat16), trans_b=True)

    with pytest.raises(kb.KernelError, match=r"composite shapes \[8, 64\] @ \[256, 128\]\^T"):
        rec(bad, {"q": kb.tensor((8, 64), "bfloat16"), "k": kb.tensor((256, 128), "bfloat16")})


@pytest.mark.parametrize("trans_b", [False, True])
def test_multi_tile_composites_replay_equal_to_numpy(tmp_path, trans_b):
    import numpy as np

    @kb.kernel
    def mm(p, w, o, *, trans_b: bool):
        a = tl.load(p, (8, 512), tl.bfloat16)
        shape = (384, 512) if trans_b else (512, 384)
        tl.store(o, tl.composite(op="gemm", a=a, b=tl.ref(w, shape, tl.bfloat16),
                                 trans_b=trans_b, tile=96))

    def reference(p, w):
        wf = w.astype(np.float32)
        return {"o": p.astype(np.float32) @ (wf.T if trans_b else wf)}

    wshape = (384, 512) if trans_b else (512, 384)
    case = kb.Case("mm", mm, (1,), {"p": kb.tensor((8, 512), "bfloat16", init=kb.randn(1)),
                                     "w": kb.tensor(wshape, "bfloat16", init=kb.randn(2)),
                                     "o": kb.tensor((8, 384), "float32", role="output")},
                   {"trans_b": trans_b}, reference=reference)
    trace = kb.record(case, tmp_path / "mm.ktrace")
    n_tiles = len(rows(trace, "dot"))
    assert n_tiles == (4 if trans_b else 6)  # ceil(384/96) column blocks, or 512/96 K slices
    res = kb.replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict
