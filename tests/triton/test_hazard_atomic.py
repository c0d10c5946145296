"""An in-flight op keeps its TCM operands: a masked vector ``tl.atomic_add`` (or a gather)
still reading offsets computed into a temporary must not have those bytes handed to the next
allocation (a ``tl.sum`` output) before it has read them (issue 27, point 4; ADR-0545)."""

from __future__ import annotations

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.analyze import check
from kernbench.replay import replay

BINS = 8


@triton.jit
def hist_kernel(idx_ptr, x_ptr, hist_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    old = tl.atomic_add(hist_ptr + (idx % 8), x, mask=m)  # noqa: F841 (offsets: a temporary)
    tl.store(total_ptr + tl.program_id(0), tl.sum(x))     # its output reuses freed bytes


@triton.jit
def gather_kernel(idx_ptr, x_ptr, table_ptr, out_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    g = tl.load(table_ptr + (idx % 8), mask=m, other=0.0)  # a gather by a temporary
    tl.store(total_ptr + tl.program_id(0), tl.sum(x))
    tl.store(out_ptr + offs, g, mask=m)


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.integers(0, 1000, n).astype(np.int32),
            rng.standard_normal(n).astype(np.float32))


def _totals(x: np.ndarray, n: int, block: int) -> np.ndarray:
    return np.add.reduceat(x.astype(np.float64), np.arange(0, n, block)).astype(np.float32)


def hist_case(n: int = 100, block: int = 64) -> kb.Case:
    idx, x = _inputs(n)
    grid = triton.cdiv(n, block)

    def reference(idx_ptr: np.ndarray, x_ptr: np.ndarray, **_: np.ndarray) -> dict:
        hist = np.zeros(BINS, np.float64)
        np.add.at(hist, idx_ptr % BINS, x_ptr)
        return {"hist_ptr": hist.astype(np.float32), "total_ptr": _totals(x_ptr, n, block)}

    return kbt.case(hist_kernel, (grid,), idx, x, np.zeros(BINS, np.float32),
                    np.zeros(grid, np.float32), n, BLOCK=block, name="hazard-atomic",
                    reference=reference)


def gather_case(n: int = 100, block: int = 64) -> kb.Case:
    idx, x = _inputs(n)
    grid = triton.cdiv(n, block)
    table = np.arange(BINS, dtype=np.float32) * 1.5

    def reference(idx_ptr: np.ndarray, x_ptr: np.ndarray, table_ptr: np.ndarray,
                  **_: np.ndarray) -> dict:
        return {"out_ptr": table_ptr[idx_ptr % BINS], "total_ptr": _totals(x_ptr, n, block)}

    return kbt.case(gather_kernel, (grid,), idx, x, table, np.zeros(n, np.float32),
                    np.zeros(grid, np.float32), n, BLOCK=block, name="hazard-gather",
                    reference=reference)


CASES = {"atomic": hist_case, "gather": gather_case}


@pytest.mark.parametrize("hw", ["ahbm-v1", "ahbm-v2"])
@pytest.mark.parametrize("kind", list(CASES))
def test_in_flight_op_keeps_its_offsets_until_read(tmp_path, kind, hw):
    case = CASES[kind]()
    trace = kb.record(case, tmp_path / "t.ktrace", hw=hw)
    report = check(trace)
    assert [(r.name, r.count) for r in report.invariants if r.count] == []
    rows = trace.ops.to_dicts()
    in_flight = next(r for r in rows if r["name"] in ("atomic_add", "gather"))
    later_sum = next(r for r in rows if r["name"] == "sum" and r["pe"] == in_flight["pe"])
    reused = {o["addr"] for o in in_flight["inputs"] if o["space"] == "tcm"}
    assert later_sum["output"]["addr"] in reused  # the freed offsets' bytes are reused ...
    assert later_sum["t_start_ps"] >= in_flight["t_end_ps"]  # ... once they have been read
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.verified, res
