"""Memory access per HBM element (``kernbench.analyze.access``) on recorded Triton kernels:
the owner of each element is the program the grid ordering predicts, per-tensor traffic has
its closed form, descriptor edge tiles touch only in-bounds elements, and ``kernbench plot
--access`` draws it (exit 2 and one line for a tensor the trace does not have)."""

from __future__ import annotations

import numpy as np
import polars as pl
from click.testing import CliRunner

from kernbench.analyze import report
from kernbench.analyze.access import access_map, element_accesses, tensor_traffic
from kernbench.cli import main
from tests.triton.conftest import KERNELS, Entry

GROUPED = next(e for e in KERNELS if e.id == "matmul-grouped-masked-k")
TMA = next(e for e in KERNELS if e.id == "matmul-tma-descriptors")
EDGES = next(e for e in KERNELS if e.id == "descriptor-edge-tiles-padding")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _grouped_pid_m(pid: int, m: int, n: int, bm: int, bn: int, group: int) -> int:
    """The tutorial's grouped ordering, in plain Python (the kernel's own formula)."""
    num_pid_m, num_pid_n = _cdiv(m, bm), _cdiv(n, bn)
    in_group = group * num_pid_n
    first = (pid // in_group) * group
    size = min(num_pid_m - first, group)
    return first + (pid % in_group) % size


def _trace(entry: Entry, replayed):
    trace, _ = replayed(entry)
    return trace


def test_owner_of_each_element_of_a_grouped_matmuls_a_is_the_program_the_ordering_predicts(
        replayed) -> None:
    m, n, k, bm, bn, group = 48, 40, 40, 16, 16, 2
    trace = _trace(GROUPED, replayed)
    grid = _cdiv(m, bm) * _cdiv(n, bn)
    readers: dict[int, list[int]] = {}
    for pid in range(grid):
        readers.setdefault(_grouped_pid_m(pid, m, n, bm, bn, group), []).append(pid)
    want_owner = np.repeat([min(readers[r // bm]) for r in range(m)], k)
    got = access_map(trace, "a_ptr")
    assert got.height == m * k
    np.testing.assert_array_equal(got["owner"].to_numpy(), want_owner)
    # every row block is read by a whole row of the grid, once each, at the A load's line
    assert set(got["programs"].to_list()) == {_cdiv(n, bn)}
    assert set(got["reads"].to_list()) == {_cdiv(n, bn)} and got["writes"].sum() == 0
    (site,) = got["site"].unique().to_list()
    assert "a_ptrs" in _line(site)


def _line(src: str) -> str:
    import linecache
    from pathlib import Path

    path, _, line = src.rpartition(":")
    full = next(p for p in (Path(path), Path("src") / path) if p.exists())
    return linecache.getline(str(full), int(line))


def test_report_lists_per_tensor_bytes_with_the_tiled_matmuls_closed_form_rereads(
        replayed) -> None:
    """A (M x K) is read once per column of tiles, B (K x N) once per row of tiles; edge
    tiles' padding is not traffic: bytes = distinct elements x itemsize x readers."""
    m, n, k, bm, bn = 40, 24, 40, 16, 16
    trace = _trace(TMA, replayed)
    got = {r["tensor"]: r for r in report(trace).to_dict()["tensors"]}
    assert got["a_desc"]["bytes_used"] == m * k * 2
    assert got["a_desc"]["bytes_read"] == m * k * 2 * _cdiv(n, bn)
    assert got["a_desc"]["rereads"] == _cdiv(n, bn)
    assert got["b_desc"]["bytes_read"] == k * n * 2 * _cdiv(m, bm)
    assert got["b_desc"]["rereads"] == _cdiv(m, bm)
    assert got["c_ptr"] == {"tensor": "c_ptr", "bytes_read": 0, "bytes_used": 0,
                            "rereads": None, "bytes_written": m * n * 2, "gather_ops": 0}
    assert "HBM tensors" in report(trace).to_text()


def test_descriptor_edge_tiles_touch_only_in_bounds_elements(replayed) -> None:
    from tests.triton.kernels.tma import shifted_positions

    m, n = 10, 12
    trace = _trace(EDGES, replayed)
    r, c, _ = shifted_positions(m, n, 1, 4, 4, 8)
    inside = (r >= 0) & (r < m) & (c >= 0) & (c < n)
    covered = np.zeros((m, n), np.int64)
    np.add.at(covered, (r[inside], c[inside]), 1)
    x, y = access_map(trace, "x_desc"), access_map(trace, "y_ptr")
    np.testing.assert_array_equal(x["reads"].to_numpy().reshape(m, n), covered)
    np.testing.assert_array_equal(y["writes"].to_numpy().reshape(m, n), covered)
    acc = element_accesses(trace, "x_desc")
    assert acc["element"].min() >= 0 and acc["element"].max() < m * n  # type: ignore[operator]
    t = tensor_traffic(trace).filter(pl.col("tensor") == "tiles_ptr").row(0, named=True)
    assert t["bytes_written"] == r.size * 4  # the padded blocks, zeros included


def test_plot_access_draws_a_tensor_and_refuses_an_unknown_one(replayed, tmp_path) -> None:
    trace = _trace(TMA, replayed)
    out = tmp_path / "a.png"
    ok = CliRunner().invoke(main, ["plot", str(trace.path), "--access", "a_desc", "-o",
                                   str(out)])
    assert ok.exit_code == 0, ok.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = CliRunner().invoke(main, ["plot", str(trace.path), "--access", "a_dsc", "-o",
                                    str(out)])
    assert bad.exit_code == 2 and "did you mean 'a_desc'" in bad.output
    assert len(bad.output.strip().splitlines()) == 1
