"""Outputs covered (ADR-0811): ``check`` says which output elements no op wrote and which two
programs both wrote, from the trace alone; replay's WRONG verdict names the never-written
elements."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.analyze import check
from kernbench.kernels.registry import build_case
from kernbench.record.lowering import addressing as ix
from kernbench.replay import replay
from kernbench.replay.result import summary
from kernbench.trace.coverage import coverage, ranges_text

ROWS, N = 2, 4096


def _written(tile: int) -> np.ndarray:
    """Which elements of scale-exp's y a program writes (the kernel's loop, by hand)."""
    w = np.zeros((ROWS, N), bool)
    for p in range(ROWS):
        for j in range(N // tile):
            w[p, j * tile:(j + 1) * tile] = True
    return w


def _ranges(flags: np.ndarray) -> list[list[int]]:
    """Flat [lo, hi) runs of the True elements (numpy, independently of coverage.py)."""
    edges = np.diff(np.concatenate(([0], flags.ravel().astype(np.int8), [0])))
    return np.column_stack((np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))).tolist()


@pytest.fixture(scope="module")
def ragged(tmp_path_factory) -> kb.Trace:
    """The README's kernel with a tile that does not divide the row: 4096 = 8 * 500 + 96."""
    return kb.record(build_case("scale-exp", {"tile": 500}),
                     tmp_path_factory.mktemp("cov") / "t500.ktrace")


def test_check_outputs_covered_names_never_written_elements(ragged):
    report = check(ragged)
    assert report.violated() == ["outputs_covered"]
    missing = ~_written(500)
    want = (f"output y: {missing.sum()} of {ROWS * N} elements never written: "
            "y[0, 4000]..y[0, 4095], y[1, 4000]..y[1, 4095]")
    assert want in report.to_text()
    (found,) = coverage(ragged.ops, ragged.tensors, ragged.access)
    assert found.unwritten.tolist() == _ranges(missing) and not len(found.shared)


def test_check_outputs_covered_passes_a_tile_that_divides_the_row(tmp_path):
    trace = kb.record(build_case("scale-exp", {"tile": 512}), tmp_path / "t.ktrace")
    assert check(trace).ok
    (found,) = coverage(trace.ops, trace.tensors, trace.access)
    assert found.n_unwritten == 0 and found.n_shared == 0 and not found.unknown


def test_replay_wrong_names_never_written_elements(ragged):
    res = replay(ragged.path, in_process=True)
    assert not res.ok
    note = res.verdict["outputs"]["y"]["unwritten"]
    assert note["count"] == int((~_written(500)).sum()) and note["of"] == ROWS * N
    assert note["ranges"] == _ranges(~_written(500))
    line = summary(res)
    assert line.startswith("WRONG: ") and "y max_abs_err=" in line
    assert "(192 of 8192 elements never written: y[0, 4000]..y[0, 4095], y[1, 4000]..y[1, " \
           "4095])" in line
    assert len(line.splitlines()) == 1


@kb.kernel
def overlapping(x, y, *, n: int, step: int):
    """Program p stores row p at offset p * step: with step < n the rows overlap."""
    p = tl.program_id(0)
    tl.store(y + p * step, tl.load(x + p * n, (n,), tl.float32))


def _overlap_case(step: int, role: str = "output") -> kb.Case:
    return kb.Case(name="overlap", kernel=overlapping, grid=(3,),
                   tensors={"x": kb.tensor((3, 64), "float32", init=kb.randn(seed=1)),
                            "y": kb.tensor((2 * step + 64,), "float32", role=role)},
                   params={"n": 64, "step": step})


def test_check_outputs_covered_flags_elements_written_by_two_programs(tmp_path):
    trace = kb.record(_overlap_case(48), tmp_path / "o.ktrace")  # rows overlap by 16
    report = check(trace)
    assert report.violated() == ["data_race", "outputs_covered"]  # unordered, too
    written = np.zeros(160, np.int64)
    for p in range(3):
        written[p * 48:p * 48 + 64] += 1
    (found,) = coverage(trace.ops, trace.tensors, trace.access)
    assert found.shared.tolist() == _ranges(written >= 2) == [[48, 64], [96, 112]]
    assert found.n_unwritten == 0
    stores = trace.ops.filter(pl.col("name") == "dma_write").sort("program")
    assert found.shared_ops == tuple(stores["op_id"][:2].to_list())
    assert found.shared_programs == (0, 1)
    text = report.to_text()
    assert "output y: 32 elements written by more than one program: y[48]..y[63], " \
           "y[96]..y[111]" in text
    assert "dma_write @ " in text  # both ops' kernel lines (op_id and other_op_id)
    # an inout tensor is checked the same way for two writers
    both = kb.record(_overlap_case(48, "inout"), tmp_path / "io.ktrace")
    assert "inout y: 32 elements written by more than one program" in check(both).to_text()


@kb.kernel
def rewrites(x, y, *, n: int):
    """Each program stores its row twice (a partial result, then the final one)."""
    p = tl.program_id(0)
    a = tl.load(x + p * n, (n,), tl.float32)
    tl.store(y + p * n, a)
    tl.store(y + p * n, a * 2.0)


def test_a_program_rewriting_its_own_output_is_not_a_double_write(tmp_path):
    case = kb.Case(name="rewrite", kernel=rewrites, grid=(2,),
                   tensors={"x": kb.tensor((2, 32), "float32", init=kb.randn(seed=2)),
                            "y": kb.tensor((2, 32), "float32", role="output")},
                   params={"n": 32})
    assert check(kb.record(case, tmp_path / "r.ktrace")).ok


def test_an_inout_tensor_may_be_partly_written_and_atomics_may_repeat(tmp_path):
    @kb.kernel
    def partial(acc, log):
        ix.atomic("add", acc.tensor, np.arange(4), 1.0, src="a:1")  # every program, the same 4
        ix.store_indexed(log.tensor, np.arange(2) + 4 * kb.tl.program_id(0), 1.0, src="a:2")

    case = kb.Case(name="partial", kernel=partial, grid=(4,),
                   tensors={"acc": kb.tensor((4,), "float32", role="output"),
                            "log": kb.tensor((16,), "float32", role="inout")})
    trace = kb.record(case, tmp_path / "p.ktrace")
    assert check(trace).ok
    found = {c.name: c for c in coverage(trace.ops, trace.tensors, trace.access)}
    assert found["acc"].n_unwritten == 0 and found["acc"].n_shared == 0
    assert found["log"].n_unwritten == 0  # inout: never checked for unwritten elements


def test_an_output_written_by_a_scatter_is_not_checked_for_unwritten_elements(tmp_path):
    @kb.kernel
    def scattered(y):
        offs = ix.constant(np.array([0, 5], np.int32), kb.tl.int32, src="s:1")
        ix.scatter(y.tensor, offs, 1.0, src="s:2")

    case = kb.Case(name="scattered", kernel=scattered, grid=(1,),
                   tensors={"y": kb.tensor((8,), "float32", role="output")})
    trace = kb.record(case, tmp_path / "s.ktrace")
    (found,) = coverage(trace.ops, trace.tensors, trace.access)
    assert found.unknown and found.n_unwritten == 0
    assert "outputs_covered" not in check(trace).violated()


def _operand(addr: int, n: int) -> dict:
    return {"space": "hbm", "pe": 0, "addr": addr, "shape": [n], "dtype": "float32",
            "transposed": False}


def test_coverage_works_on_ranges_of_a_tensor_of_2_to_the_40_elements():
    """Two writes leave one gap in a 2^40-element output: answered from the ranges (a
    per-element pass would need terabytes)."""
    n = 1 << 40
    ops = pl.DataFrame({
        "op_id": [0, 1], "program": [0, 1], "name": ["dma_write", "dma_write"],
        "inputs": [[], []], "attrs": ["{}", "{}"],
        "output": [_operand(0, n // 2), _operand(4 * (n // 2 + 10), n // 2 - 10)]},
        schema_overrides={"inputs": pl.List(pl.Struct({"space": pl.String}))})
    tensors = pl.DataFrame({"name": ["y"], "role": ["output"], "addr": [0], "shape": [[n]],
                            "dtype": ["float32"]})
    (found,) = coverage(ops, tensors)
    assert found.unwritten.tolist() == [[n // 2, n // 2 + 10]] and found.n_unwritten == 10


def test_ranges_text_shows_the_first_ranges_as_indices():
    ranges = np.array([[1, 2], [3, 4], [5, 9], [11, 12]])
    assert ranges_text("y", (4, 4), ranges) == \
        "y[0, 1], y[0, 3], y[1, 1]..y[2, 0], ... (4 ranges)"


def test_coverage_counts_its_ranges_against_the_memory_budget(ragged, monkeypatch):
    from kernbench.trace.coverage import BYTES_PER_RANGE
    from kernbench.trace.limits import LIMIT_ENV, TraceLimitError

    writes = ragged.ops.filter(pl.col("name").cast(pl.String) == "dma_write").height
    monkeypatch.setenv(LIMIT_ENV, str((writes * BYTES_PER_RANGE - 1) / 2**30))
    with pytest.raises(TraceLimitError, match=f"the outputs' coverage \\({writes} writes"):
        coverage(ragged.ops, ragged.tensors, ragged.access)
    monkeypatch.setenv(LIMIT_ENV, str((writes * BYTES_PER_RANGE + 1) / 2**30))
    assert coverage(ragged.ops, ragged.tensors, ragged.access)[0].n_unwritten == 192


def _locked_writes(with_lock: bool) -> pl.DataFrame:
    """Programs 0 and 1 each store y[0:4]; with ``with_lock`` each first takes a lock with
    ``atomic_cas`` (the lock's int32 sits at byte 64)."""
    lock = {**_operand(64, 1), "dtype": "int32"}
    rows = []
    for p in (0, 1):
        if with_lock:
            rows.append({"program": p, "name": "atomic_cas", "inputs": [lock], "output": None})
        rows.append({"program": p, "name": "dma_write", "inputs": [], "output": _operand(0, 4)})
    operand = pl.Struct({"space": pl.String, "pe": pl.Int64, "addr": pl.Int64,
                         "shape": pl.List(pl.Int64), "dtype": pl.String,
                         "transposed": pl.Boolean})
    return pl.DataFrame([{**r, "op_id": i, "attrs": "{}"} for i, r in enumerate(rows)],
                        schema_overrides={"inputs": pl.List(operand), "output": operand})


@pytest.mark.parametrize("with_lock", [False, True])
def test_plain_writes_after_an_atomic_of_their_program_are_ordered_by_it(with_lock):
    """Atomics are acq_rel: two programs storing the same elements inside a lock taken with
    ``atomic_cas`` are ordered by the lock, not by timing; without it they are a double
    write."""
    tensors = pl.DataFrame({"name": ["y"], "role": ["inout"], "addr": [0], "shape": [[4]],
                            "dtype": ["float32"]})
    (found,) = coverage(_locked_writes(with_lock), tensors)
    assert found.n_shared == (0 if with_lock else 4)
