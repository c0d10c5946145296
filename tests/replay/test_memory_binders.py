"""Indexed memory in Phase 2: strided, masked and access-referenced loads and stores,
const, gather/scatter and atomics replay to numpy; bad indices are one-line ReplayErrors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.conftest import rewrite_ops

import kernbench as kb
from kernbench import tl
from kernbench.analyze import check
from kernbench.record.lowering import addressing as ix
from kernbench.replay import replay

X = np.arange(128, dtype=np.float32).reshape(8, 16) * 0.5


def _run(tmp_path, kernel, tensors, reference, grid=(1,), params=None, name="t"):
    case = kb.Case(name=name, kernel=kernel, grid=grid, tensors=tensors, params=params or {},
                   reference=reference)
    trace = kb.record(case, out=tmp_path / f"{name}.ktrace")
    report = check(trace)
    assert report.exit_code == 0, report.to_text()
    return trace, replay(trace.path, case=lambda: case, in_process=True)


def _checked(res):
    assert res.ok, res.verdict
    assert all(v["checked"] for v in res.verdict["outputs"].values())


@kb.kernel
def ragged(x, y, *, n: int, block: int):
    offs = tl.program_id(0) * block + np.arange(block)
    m = offs < n
    a = ix.load_indexed(x.tensor, offs, m, 0.0, src="k.py:1")
    ix.store_indexed(y.tensor, offs, a * 2.0, m, src="k.py:2")


def test_a_ragged_tail_replays_verified(tmp_path):
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    trace, res = _run(tmp_path, ragged, {"x": kb.tensor((100,), "float32", init=kb.data(x)),
                                         "y": kb.tensor((100,), "float32", role="output")},
                      lambda x: {"y": x * 2}, grid=(2,), params={"n": 100, "block": 64})
    assert trace.manifest["schema_version"] == 2
    _checked(res)
    assert np.array_equal(res.outputs["y"], x * 2)


def test_a_column_tile_load_and_a_strided_store_transpose(tmp_path):
    @kb.kernel
    def transpose(x, y):
        j = tl.program_id(0)
        col = ix.load_indexed(x.tensor, np.arange(8) * 16 + j, src="t:1")
        ix.store_indexed(y.tensor, np.arange(8) + 8 * j, col, src="t:2")

    trace, res = _run(tmp_path, transpose,
                      {"x": kb.tensor((8, 16), "float32", init=kb.data(X)),
                       "y": kb.tensor((16, 8), "float32", role="output")},
                      lambda x: {"y": x.T.copy()}, grid=(16,))
    _checked(res)


def test_a_2d_block_with_masked_rows_and_columns_keeps_other(tmp_path):
    @kb.kernel
    def block(x, y):
        r, c = np.arange(4)[:, None] + 6, np.arange(8)[None, :] + 12
        m = (r < 8) & (c < 16)
        a = ix.load_indexed(x.tensor, r * 16 + c, m, -1.0, src="b:1")
        ix.store_indexed(y.tensor, np.arange(32).reshape(4, 8), a, src="b:2")

    def want(x):
        out = np.full((4, 8), -1.0, np.float32)
        out[:2, :4] = x[6:8, 12:16]
        return {"y": out}

    trace, res = _run(tmp_path, block, {"x": kb.tensor((8, 16), "float32", init=kb.data(X)),
                                        "y": kb.tensor((4, 8), "float32", role="output")},
                      want)
    _checked(res)
    assert json.loads(trace.ops["attrs"][0])["strides"] == [16, 1]


def test_non_affine_offsets_and_a_masked_store_write_only_masked_in_elements(tmp_path):
    perm = np.array([[5, 3], [9, 4]])

    @kb.kernel
    def k(x, y):
        a = ix.load_indexed(x.tensor, perm, src="p:1")
        ix.store_indexed(y.tensor, perm + 1, a, np.array([[True, False], [True, True]]),
                         src="p:2")

    x = np.arange(16, dtype=np.float32) + 1

    def want(x, y):
        out = y.copy()
        out[[6, 10, 5]] = x[[5, 9, 4]]
        return {"y": out}

    y0 = np.full(16, 7.0, np.float32)
    _, res = _run(tmp_path, k, {"x": kb.tensor((16,), "float32", init=kb.data(x)),
                                "y": kb.tensor((16,), "float32", role="inout",
                                               init=kb.data(y0))}, want)
    _checked(res)


def test_masked_off_offsets_outside_the_tensor_are_never_read(tmp_path):
    @kb.kernel
    def halo(x, y):
        offs = np.arange(-3, 5)
        a = ix.load_indexed(x.tensor, offs, offs >= 0, 9.0, src="h:1")
        ix.store_indexed(y.tensor, np.arange(8), a, src="h:2")

    x = np.arange(16, dtype=np.float32)
    _, res = _run(tmp_path, halo, {"x": kb.tensor((16,), "float32", init=kb.data(x)),
                                   "y": kb.tensor((8,), "float32", role="output")},
                  lambda x: {"y": np.array([9, 9, 9, 0, 1, 2, 3, 4], np.float32)})
    _checked(res)


def test_a_store_converts_to_the_tensor_dtype(tmp_path):
    @kb.kernel
    def k(x, y):
        a = ix.load_indexed(x.tensor, np.arange(0, 16, 2), src="c:1")
        ix.store_indexed(y.tensor, np.arange(8) * 2, a, src="c:2")

    x = np.arange(16, dtype=np.float32) / 3

    def want(x):
        y = np.zeros(16, np.float16)
        y[::2] = x[::2].astype(np.float16)
        return {"y": y}

    _, res = _run(tmp_path, k, {"x": kb.tensor((16,), "float32", init=kb.data(x)),
                                "y": kb.tensor((16,), "float16", role="output")}, want)
    _checked(res)


def test_an_indexed_element_outside_the_tensor_in_a_hand_edited_trace_names_the_op(tmp_path):
    @kb.kernel
    def k(x, y):
        ix.store_indexed(y.tensor, np.arange(4),
                         ix.load_indexed(x.tensor, np.arange(4) * 2, src="e:1"), src="e:2")

    case = kb.Case(name="e", kernel=k, grid=(1,),
                   tensors={"x": kb.tensor((16,), "float32"),
                            "y": kb.tensor((4,), "float32", role="output")})
    trace = kb.record(case, out=tmp_path / "e.ktrace")

    def edit(rows):
        rows[0]["attrs"] = json.dumps({"strides": [9]})

    rewrite_ops(trace.path, edit)
    res = replay(trace.path, in_process=True)
    assert not res.ok
    msg = res.verdict["invalid_read"]["message"]
    assert "op 0 (dma_read at e:1)" in msg and "tile index [2]" in msg and "'x'" in msg


# -- const, gather, scatter, atomics -----------------------------------------------------------
def test_const_values_materialise_in_tcm(tmp_path):
    vals = np.array([[1, -2], [3, 40]], np.int32)

    @kb.kernel
    def k(y):
        c = ix.constant(vals, tl.int32, src="c:1")
        ix.store_indexed(y.tensor, np.arange(4).reshape(2, 2), c, src="c:2")

    trace, res = _run(tmp_path, k, {"y": kb.tensor((2, 2), "int32", role="output")},
                      lambda: {"y": vals})
    _checked(res)
    assert trace.ops["name"].cast(str).to_list()[0] == "const"


def test_an_embedding_gather_by_loaded_indices(tmp_path):
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    ids = np.array([3, 0, 9, 3], np.int32)

    @kb.kernel
    def embed(idx, w, out):
        i = tl.load(idx, (4,), tl.int32)
        rows = tl.reshape(i, (4, 1)) * 4 + ix.constant(np.arange(4).reshape(1, 4), tl.int32,
                                                        src="g:0")
        e = ix.gather(w.tensor, rows, src="g:1")
        ix.store_indexed(out.tensor, np.arange(16).reshape(4, 4), e, src="g:2")

    _, res = _run(tmp_path, embed, {"idx": kb.tensor((4,), "int32", init=kb.data(ids)),
                                    "w": kb.tensor((10, 4), "float32", init=kb.data(table)),
                                    "out": kb.tensor((4, 4), "float32", role="output")},
                  lambda idx, w: {"out": w[idx]})
    _checked(res)


def test_a_gather_out_of_range_is_a_replay_error_naming_the_op(tmp_path):
    @kb.kernel
    def bad(idx, w, out):
        e = ix.gather(w.tensor, tl.load(idx, (2,), tl.int32), src="g.py:5")
        ix.store_indexed(out.tensor, np.arange(2), e, src="g.py:6")

    case = kb.Case(name="g", kernel=bad, grid=(1,),
                   tensors={"idx": kb.tensor((2,), "int32", init=kb.data(np.array([1, 12],
                                                                               np.int32))),
                            "w": kb.tensor((10,), "float32"),
                            "out": kb.tensor((2,), "float32", role="output")})
    trace = kb.record(case, out=tmp_path / "g.ktrace")
    res = replay(trace.path, in_process=True)
    assert not res.ok
    msg = res.verdict["invalid_read"]["message"]
    assert "(gather at g.py:5)" in msg and "offset 12 at tile index [1]" in msg


def test_gather_and_scatter_with_masks_from_data(tmp_path):
    @kb.kernel
    def k(idx, x, y):
        i = tl.load(idx, (4,), tl.int32)
        m = i >= 0
        v = ix.gather(x.tensor, tl.maximum(i, 0), m, -5.0, src="s:1")
        ix.scatter(y.tensor, tl.maximum(i, 0), v * 10.0, m, src="s:2")
        ix.store_indexed(y.tensor, np.arange(4) + 12, v, src="s:3")

    ids = np.array([2, -1, 7, 0], np.int32)
    x = np.arange(16, dtype=np.float32)

    def want(idx, x):
        y = np.zeros(16, np.float32)
        y[[2, 7, 0]] = x[[2, 7, 0]] * 10
        y[12:] = [2, -5, 7, 0]
        return {"y": y}

    _, res = _run(tmp_path, k, {"idx": kb.tensor((4,), "int32", init=kb.data(ids)),
                                "x": kb.tensor((16,), "float32", init=kb.data(x)),
                                "y": kb.tensor((16,), "float32", role="output")}, want)
    _checked(res)


def test_atomic_add_across_programs_returns_old_values_in_time_order(tmp_path):
    @kb.kernel
    def acc(x, total, olds):
        p = tl.program_id(0)
        v = tl.load(x + p * 4, (4,), tl.float32)
        old = ix.atomic("add", total.tensor, np.arange(4), v, src="a:1")
        ix.store_indexed(olds.tensor, np.arange(4) + 4 * p, old, src="a:2")

    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    trace, res = _run(tmp_path, acc, {"x": kb.tensor((8, 4), "float32", init=kb.data(x)),
                                      "total": kb.tensor((4,), "float32", role="output"),
                                      "olds": kb.tensor((8, 4), "float32", role="output")},
                      lambda x: {"total": x.sum(0)}, grid=(8,))
    assert res.ok, res.verdict
    ops = trace.ops.filter(trace.ops["name"].cast(str) == "atomic_add").sort("t_start_ps")
    order = ops["program"].to_list()
    prefix = np.cumsum(x[order], axis=0) - x[order]
    assert np.array_equal(res.outputs["olds"][order], prefix)


@pytest.mark.parametrize(("op", "fn"), [("max", np.maximum), ("min", np.minimum),
                                         ("xchg", lambda a, b: b)])
def test_other_atomics_with_a_scalar_and_a_mask(tmp_path, op, fn):
    @kb.kernel
    def k(t):
        ix.atomic(op, t.tensor, np.array([0, 1, 2, 3]), 2, np.array([True, True, False, True]),
                  src="a:1")

    t0 = np.array([1, 5, 1, -3], np.int32)

    def want(t):
        out = t.copy()
        for i in (0, 1, 3):
            out[i] = fn(t[i], 2)
        return {"t": out}

    _, res = _run(tmp_path, k, {"t": kb.tensor((4,), "int32", role="inout", init=kb.data(t0))},
                  want)
    _checked(res)


def test_duplicate_offsets_in_one_atomic_add_accumulate(tmp_path):
    @kb.kernel
    def hist(idx, h):
        i = tl.load(idx, (6,), tl.int32)
        ix.atomic("add", h.tensor, i, 1, src="h:1")

    ids = np.array([0, 2, 2, 1, 2, 0], np.int32)
    _, res = _run(tmp_path, hist, {"idx": kb.tensor((6,), "int32", init=kb.data(ids)),
                                   "h": kb.tensor((3,), "int32", role="output")},
                  lambda idx: {"h": np.bincount(idx, minlength=3).astype(np.int32)})
    _checked(res)
