"""Indexed memory in Phase 1: rows, access.parquet, bounds, the run-based DMA cost."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import BoundsError, DtypeError, ShapeError
from kernbench.record.lowering import addressing as ix
from kernbench.record.machine.engines import DmaChannel
from kernbench.schemas import elements as six
from kernbench.trace.hw import HwConfig


@kb.kernel
def ragged(x, y, *, n: int, block: int):
    offs = tl.program_id(0) * block + np.arange(block)
    m = offs < n
    a = ix.load_indexed(x.tensor, offs, m, 0.0, src="k.py:1")
    ix.store_indexed(y.tensor, offs, a, m, src="k.py:2")


def ragged_case(n: int = 100, block: int = 64, grid: int = 2) -> kb.Case:
    return kb.Case(name="ragged", kernel=ragged, grid=(grid,),
                   tensors={"x": kb.tensor((n,), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((n,), "float32", role="output")},
                   params={"n": n, "block": block}, reference=lambda x: {"y": x})


def _attrs(trace: kb.Trace) -> list[dict]:
    return [json.loads(a) for a in trace.ops["attrs"]]


def test_a_full_contiguous_tile_writes_the_plain_load_row_and_a_version_1_trace(tmp_path):
    t = kb.record(ragged_case(n=128, block=64), out=tmp_path / "t.ktrace")
    assert t.manifest["schema_version"] == 1
    assert "access.parquet" not in t.manifest["files"]
    assert not (t.path / "access.parquet").exists()
    assert all(a == {} for a in _attrs(t))


def test_a_ragged_tail_is_a_strided_masked_row_counting_only_masked_in_bytes(tmp_path):
    t = kb.record(ragged_case(), out=tmp_path / "t.ktrace")
    assert t.manifest["schema_version"] == 2 and "access.parquet" in t.manifest["files"]
    ops = t.ops.filter(t.ops["program"] == 1)
    read = ops.row(0, named=True)
    assert json.loads(read["attrs"]) == {"mask": 0, "other": 0.0, "strides": [1]}
    assert read["nbytes"] == 36 * 4 and read["num_elements"] == 36
    assert read["inputs"][0]["addr"] == 4096 * 0 + 64 * 4
    mask = t.access.get(0, "mask", (64,))
    assert mask.sum() == 36 and mask[:36].all()


def test_the_same_mask_in_many_programs_is_stored_once(tmp_path):
    @kb.kernel
    def rows(x, y, *, cols: int):
        offs = tl.program_id(0) * 64 + np.arange(64)
        m = np.arange(64) < cols
        ix.store_indexed(y.tensor, offs, ix.load_indexed(x.tensor, offs, m, src="r:1"), m,
                         src="r:2")

    case = kb.Case(name="rows", kernel=rows, grid=(16,),
                   tensors={"x": kb.tensor((16, 64), "float32"),
                            "y": kb.tensor((16, 64), "float32", role="output")},
                   params={"cols": 50})
    t = kb.record(case, out=tmp_path / "t.ktrace")
    assert pq.read_table(t.path / "access.parquet").num_rows == 1


def test_access_parquet_is_byte_identical_across_recordings(tmp_path):
    a = kb.record(ragged_case(grid=2), out=tmp_path / "a.ktrace")
    b = kb.record(ragged_case(grid=2), out=tmp_path / "b.ktrace")
    for f in ("ops.parquet", "access.parquet"):
        assert (a.path / f).read_bytes() == (b.path / f).read_bytes()


def test_non_affine_offsets_go_to_access_parquet_relative_to_the_lowest_element(tmp_path):
    @kb.kernel
    def perm(x, y):
        offs = np.array([5, 3, 9, 4])
        ix.store_indexed(y.tensor, np.arange(4), ix.load_indexed(x.tensor, offs, src="p:1"),
                         src="p:2")

    case = kb.Case(name="perm", kernel=perm, grid=(1,),
                   tensors={"x": kb.tensor((16,), "float32"),
                            "y": kb.tensor((4,), "float32", role="output")})
    t = kb.record(case, out=tmp_path / "t.ktrace")
    read = t.ops.row(0, named=True)
    ref = json.loads(read["attrs"])["access"]
    assert read["inputs"][0]["addr"] == 3 * 4
    assert t.access.get(ref, "offsets", (4,)).tolist() == [2, 0, 6, 1]


def test_a_column_tile_keeps_its_strides_inline(tmp_path):
    @kb.kernel
    def col(x, y):
        offs = np.arange(8)[:, None] * 16 + 3
        ix.store_indexed(y.tensor, np.arange(8)[:, None], ix.load_indexed(x.tensor, offs,
                                                                         src="c:1"), src="c:2")

    case = kb.Case(name="col", kernel=col, grid=(1,),
                   tensors={"x": kb.tensor((8, 16), "float32"),
                            "y": kb.tensor((8,), "float32", role="output")})
    t = kb.record(case, out=tmp_path / "t.ktrace")
    assert _attrs(t)[0] == {"strides": [16, 0]}
    assert t.ops.row(0, named=True)["inputs"][0]["shape"] == [8, 1]
    assert _attrs(t)[1] == {}  # [8, 1] contiguous offsets: the plain store


@pytest.mark.parametrize(("offsets", "mask", "match"), [
    (np.array([0, 16]), None, r"offset 16 at tile index \[1\] is outside tensor 'x' \(16"),
    (np.array([-1, 2]), np.array([True, True]), r"offset -1 at tile index \[0\]"),
])
def test_an_unmasked_offset_outside_the_tensor_is_a_bounds_error(tmp_path, offsets, mask,
                                                                  match):
    @kb.kernel
    def bad(x):
        ix.load_indexed(x.tensor, offsets, mask, src="b.py:7")

    case = kb.Case(name="bad", kernel=bad, grid=(1,), tensors={"x": kb.tensor((16,), "float32")})
    with pytest.raises(BoundsError, match="b.py:7: .*" + match):
        kb.record(case, out=tmp_path / "t.ktrace")


def test_masked_off_offsets_outside_the_tensor_are_fine(tmp_path):
    @kb.kernel
    def halo(x, y):
        offs = np.arange(-2, 6)
        a = ix.load_indexed(x.tensor, offs, offs >= 0, src="h:1")
        ix.store_indexed(y.tensor, np.arange(8), a, src="h:2")

    case = kb.Case(name="halo", kernel=halo, grid=(1,),
                   tensors={"x": kb.tensor((16,), "float32"),
                            "y": kb.tensor((8,), "float32", role="output")})
    t = kb.record(case, out=tmp_path / "t.ktrace")
    assert json.loads(t.ops["attrs"][0]) == {"base": -2, "mask": 0, "strides": [1]}


@pytest.mark.parametrize(("offsets", "mask", "err", "match"), [
    (np.array([0.0, 1.0]), None, DtypeError, "offsets must be integers"),
    (np.arange(4), np.ones(3, bool), ShapeError, r"mask \[3\] does not fit offsets \[4\]"),
    (np.arange(4), np.ones(4, np.int32), DtypeError, "mask must be bool"),
])
def test_bad_offsets_and_masks_are_kernel_errors(tmp_path, offsets, mask, err, match):
    @kb.kernel
    def bad(x):
        ix.load_indexed(x.tensor, offsets, mask, src="b.py:1")

    case = kb.Case(name="bad", kernel=bad, grid=(1,), tensors={"x": kb.tensor((16,), "float32")})
    with pytest.raises(err, match=match):
        kb.record(case, out=tmp_path / "t.ktrace")


# -- the run-based DMA cost ------------------------------------------------------------------
def test_a_single_run_costs_what_a_contiguous_transfer_costs():
    ch = DmaChannel(HwConfig())
    assert six.dma_work(np.arange(10, 74), 4, 64) == (256,)
    assert ch.cost(*six.dma_work(np.arange(64), 4, 64)) == ch.cost(256)


def test_k_runs_cost_their_bursts_plus_k_minus_1_overheads():
    hw = HwConfig()
    ch = DmaChannel(hw)
    elems = (np.arange(8)[:, None] * 100 + np.arange(4)).reshape(-1)  # 8 runs of 16 bytes
    work = six.dma_work(elems, 4, hw.dma_burst_bytes)
    assert work == (128, 8 * 64, 8)
    busy, latency = ch.cost(*work)
    assert busy == 8 * 64 * 1000 // 128 + 7 * 2000 and latency == hw.dma_latency_ns * 1000


def test_a_column_load_costs_more_than_a_row_load_of_the_same_bytes(tmp_path):
    @kb.kernel
    def both(x, y):
        r = ix.load_indexed(x.tensor, np.arange(32), src="r:1")
        c = ix.load_indexed(x.tensor, np.arange(32) * 32, src="c:1")
        ix.store_indexed(y.tensor, np.arange(32), r + c, src="s:1")

    case = kb.Case(name="both", kernel=both, grid=(1,),
                   tensors={"x": kb.tensor((32, 32), "float32"),
                            "y": kb.tensor((32,), "float32", role="output")})
    t = kb.record(case, out=tmp_path / "t.ktrace")
    row, col = t.ops["busy_ps"][0], t.ops["busy_ps"][1]
    assert t.ops["nbytes"][0] == t.ops["nbytes"][1] == 128
    assert col == 32 * 64 * 1000 // 128 + 31 * 2000 and row == 1000


def test_affine_detection_and_runs():
    assert six.affine(np.arange(6).reshape(2, 3) * 2 + 1) == (1, [6, 2])
    assert six.affine(np.array([0, 1, 3])) is None
    assert six.runs(np.array([7, 1, 2, 3, 5, 6, 2])).tolist() == [3, 3]


_SCRIPT = """
import sys
import numpy as np
import kernbench as kb
from kernbench.record.lowering import addressing as ix

@kb.kernel
def k(x, y):
    p = kb.tl.program_id(0)
    offs = (p * 24 + np.arange(32)) % 100
    m = (np.arange(32) + p) % 3 != 0
    a = ix.load_indexed(x.tensor, offs, m, -1.0, src="d:1")
    ix.store_indexed(y.tensor, offs, a, m & (offs >= p), src="d:2")

case = kb.Case(name="d", kernel=k, grid=(5,),
               tensors={"x": kb.tensor((100,), "float32", init=kb.randn(seed=1)),
                        "y": kb.tensor((100,), "float32", role="output")})
kb.record(case, out=sys.argv[1])
"""


def test_indexed_traces_are_byte_identical_under_several_hash_seeds(tmp_path):
    import os
    import subprocess
    import sys

    digests = []
    for seed in ("0", "1", "2"):
        out = tmp_path / f"s{seed}.ktrace"
        subprocess.run([sys.executable, "-c", _SCRIPT, str(out)], check=True, timeout=300,
                       env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True)
        digests.append({f: (out / f).read_bytes() for f in ("ops.parquet", "access.parquet",
                                                             "manifest.json")})
    assert digests[0] == digests[1] == digests[2]


def test_runs_of_address_ordered_and_shuffled_elements_agree_with_a_set_walk():
    rng = np.random.default_rng(7)
    for _ in range(200):
        elements = np.unique(rng.integers(0, 64, rng.integers(1, 40)))
        want, run = [], 1  # the runs of the distinct sorted set, walked one by one
        for a, b in zip(elements[:-1], elements[1:], strict=True):
            if b == a + 1:
                run += 1
            else:
                want.append(run)
                run = 1
        want.append(run)
        assert six.runs(elements).tolist() == want
        shuffled = rng.permutation(np.concatenate([elements, elements[: len(elements) // 2]]))
        assert six.runs(shuffled).tolist() == want
