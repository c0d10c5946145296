"""DMA timing of Triton loads and stores (docs/triton.md, docs/hardware-model.md): a transfer is a
set of contiguous runs; one run costs its bytes at ``hbm_gbps``, k > 1 runs cost their bursts
plus ``k - 1`` run overheads; masked-off elements move nothing. Expected costs are the closed
forms over the ``ahbm-v1`` fields (integer picoseconds, rounded up)."""

from __future__ import annotations

from fractions import Fraction
from math import ceil

import polars as pl

from kernbench.trace.hw import load_hw
from tests.triton.kernels import tiles, vector_add

HW = load_hw("ahbm-v1")


def _bytes_ps(nbytes: int) -> int:
    return ceil(Fraction(nbytes) * 1000 / Fraction(str(HW.hbm_gbps)))


def contiguous_ps(nbytes: int) -> int:
    return _bytes_ps(nbytes)


def runs_ps(runs: list[int]) -> int:
    burst = HW.dma_burst_bytes
    bursts = sum(ceil(r / burst) for r in runs) * burst
    return _bytes_ps(bursts) + (len(runs) - 1) * round(HW.dma_run_overhead_ns * 1000)


def _ops(trace, name: str) -> pl.DataFrame:
    ops = trace.ops
    return ops.filter(ops["name"].cast(str) == name)


def test_masked_tail_moves_only_its_bytes(kb_record) -> None:
    n, block = 1000, 256
    trace = kb_record(vector_add.case, n=n, block=block)
    reads, writes = _ops(trace, "dma_read"), _ops(trace, "dma_write")
    assert reads["nbytes"].sum() == 2 * n * 4 and writes["nbytes"].sum() == n * 4
    tail_program = n // block
    tail_bytes = (n - tail_program * block) * 4
    for rows in (reads, writes):
        tail = rows.filter(pl.col("program") == tail_program)
        full = rows.filter(pl.col("program") != tail_program)
        assert set(tail["nbytes"]) == {tail_bytes} and set(full["nbytes"]) == {block * 4}
        assert set(tail["busy_ps"]) == {contiguous_ps(tail_bytes)}
        assert set(full["busy_ps"]) == {contiguous_ps(block * 4)}
        assert set(tail["num_elements"]) == {tail_bytes // 4}


def test_column_tile_load_costs_more_than_a_row_tile_of_the_same_bytes(kb_record) -> None:
    n, narrow, wide = 64, 4, 64
    row = _ops(kb_record(tiles.case, rows=narrow, cols=wide, n=n), "dma_read")
    col = _ops(kb_record(tiles.case, rows=wide, cols=narrow, n=n), "dma_read")
    assert row["nbytes"].to_list() == col["nbytes"].to_list() == [narrow * wide * 4]
    assert row["busy_ps"].to_list() == [contiguous_ps(narrow * wide * 4)]
    assert col["busy_ps"].to_list() == [runs_ps([narrow * 4] * wide)]
    assert col["busy_ps"][0] > row["busy_ps"][0]


def test_contiguous_store_of_a_column_tile_is_one_run(kb_record) -> None:
    """The contiguous output of the tile copy is one run, whatever the tile's shape."""
    n, narrow, wide = 64, 4, 64
    col = _ops(kb_record(tiles.case, rows=wide, cols=narrow, n=n), "dma_write")
    assert col["busy_ps"].to_list() == [contiguous_ps(narrow * wide * 4)]
