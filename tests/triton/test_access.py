"""Memory access per HBM element (``kernbench.analyze.access``) on recorded Triton kernels:
the owner of each element is the program the grid ordering predicts, per-tensor traffic has
its closed form, descriptor edge tiles touch only in-bounds elements, and ``kernbench plot
--access`` draws it (exit 2 and one line for a tensor the trace does not have). Scatters and
atomics at loaded offsets are counted, not placed: the picture names what it leaves out, and
a tensor with nothing placed is refused in one line (exit 2), never a matplotlib error."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
import triton
import triton.language as tl
from click.testing import CliRunner

import kernbench as kb
from kernbench import triton as kbt
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


# -- what the trace cannot place: scatters and atomics at loaded offsets (known at replay) ---
@triton.jit
def copy_then_scatter_kernel(x_ptr, idx_ptr, out_ptr, hist_ptr, sum_ptr, spare_ptr,
                             BLOCK: tl.constexpr, N: tl.constexpr):
    """Row 0 of ``out`` a placed copy of ``x``, row 1 ``2 x`` scattered to the positions
    ``idx`` holds, ``hist`` bumped at loaded offsets, ``sum`` one element; ``spare`` never
    touched."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    dst = tl.load(idx_ptr + offs)
    tl.store(out_ptr + offs, x)
    tl.store(out_ptr + N + dst, x * 2.0)
    tl.atomic_add(hist_ptr + dst % 4, x)
    tl.atomic_add(sum_ptr, tl.sum(x, axis=0))


N, BLOCK = 16, 8


@pytest.fixture(scope="module")
def scattered(tmp_path_factory) -> dict[str, Any]:
    """The issue's permute kernel and the kernel above, recorded (Phase 1 is all the access
    picture reads)."""
    from tests.triton.kernels import permute

    x = np.arange(N, dtype=np.float32)
    idx = np.random.default_rng(3).permutation(N).astype(np.int32)
    case = kbt.case(copy_then_scatter_kernel, (N // BLOCK,), x, idx,
                    np.zeros((2, N), np.float32), np.zeros(4, np.float32),
                    np.zeros(1, np.float32), np.zeros(3, np.float32), BLOCK=BLOCK, N=N)
    d = tmp_path_factory.mktemp("scattered")
    return {"permute": kb.record(permute.case(), out=d / "permute.ktrace"),
            "mixed": kb.record(case, out=d / "mixed.ktrace")}


def _plot(trace, tensor: str, out):
    return CliRunner().invoke(main, ["plot", str(trace.path), "--access", tensor, "-o",
                                     str(out)])


def test_plot_access_refuses_a_scatter_only_tensor_in_one_line_naming_it_and_why(
        scattered, tmp_path) -> None:
    """The permute kernel's output is written only by scatters at loaded offsets: exit 2,
    one line naming the tensor and the reason, nothing drawn, the trace not blamed."""
    trace = scattered["permute"]
    got = _plot(trace, "out_ptr", tmp_path / "p.png")
    assert got.exit_code == 2 and len(got.output.strip().splitlines()) == 1, got.output
    assert "'out_ptr': it is moved only by 2 scatter ops" in got.output
    assert "known only at replay" in got.output
    assert "cannot read the trace" not in got.output and "FixedLocator" not in got.output
    assert not (tmp_path / "p.png").exists()
    row = tensor_traffic(trace).filter(pl.col("tensor") == "out_ptr").row(0, named=True)
    assert row["gather_ops"] == 2 and row["bytes_written"] == 0


def test_atomics_at_loaded_offsets_are_counted_not_spread_over_the_whole_tensor(
        scattered, tmp_path) -> None:
    trace = scattered["mixed"]
    assert access_map(trace, "hist_ptr")["touches"].sum() == 0
    row = tensor_traffic(trace).filter(pl.col("tensor") == "hist_ptr").row(0, named=True)
    assert (row["gather_ops"], row["bytes_read"], row["bytes_written"]) == (2, 0, 0)
    got = _plot(trace, "hist_ptr", tmp_path / "h.png")
    assert got.exit_code == 2 and "'hist_ptr': it is moved only by 2 atomic_add ops" in \
        got.output
    # the one-element sum is an atomic at a concrete address: placed, both programs
    one = access_map(trace, "sum_ptr").row(0, named=True)
    assert (one["reads"], one["writes"], one["programs"], one["owner"]) == (2, 2, 2, 0)


def test_plot_access_draws_the_placed_part_of_a_tensor_and_names_the_scatters_it_leaves_out(
        scattered) -> None:
    from kernbench.plot.access_figure import access_figure

    trace = scattered["mixed"]
    got = access_map(trace, "out_ptr")
    np.testing.assert_array_equal(got["writes"].to_numpy().reshape(2, N),
                                  [[1] * N, [0] * N])
    owner = got["owner"].to_numpy(allow_copy=True).reshape(2, N)
    np.testing.assert_array_equal(owner[0], np.arange(N) // BLOCK)
    assert got["owner"].null_count() == N  # row 1: only scattered
    title = access_figure(trace, "out_ptr").get_suptitle()  # drawn: the CLI test above
    assert "\nnot drawn: 2 scatter ops on out_ptr" in title and "replay" in title


@pytest.mark.parametrize(("tensor", "shape"), [("x_ptr", (4, 4)), ("sum_ptr", (1, 1))],
                         ids=["single-row-folded", "single-element"])
def test_plot_access_draws_a_single_row_or_single_element_tensor(scattered, tensor,
                                                                  shape) -> None:
    from kernbench.plot.access_figure import access_figure

    fig = access_figure(scattered["mixed"], tensor)
    assert "not drawn" not in fig.get_suptitle()  # nothing left out
    assert [ax.images[0].get_array().shape for ax in fig.axes[:3]] == [shape] * 3
    site_bar = fig.axes[4]  # the colorbar of the kernel-line panel: one label a tick
    assert len(site_bar.get_yticks()) == len(site_bar.get_yticklabels()) == 1


def test_plot_access_refuses_a_tensor_nothing_touches(scattered, tmp_path) -> None:
    got = _plot(scattered["mixed"], "spare_ptr", tmp_path / "s.png")
    assert got.exit_code == 2 and len(got.output.strip().splitlines()) == 1
    assert "'spare_ptr': no load, store or atomic in the trace touches it" in got.output


# -- the aggregates against a per-element reference (issue 43: they never build it) --------
def _reference(trace, tensor: str) -> dict[str, Any]:
    """Per element of ``tensor``, from every row's moved offsets built one by one
    (``schemas.elements``), as plain numpy and Python sets: reads, writes, touches, the
    programs, the first (program, op_id); and the distinct elements read."""
    import json

    from kernbench.analyze.access import _hbm_rows, _tensors
    from kernbench.schemas import elements as ix
    from kernbench.schemas.dtypes import DTYPES

    t = next(t for t in _tensors(trace) if t["name"] == tensor)
    n = int(np.prod(t["shape"]))
    got = {k: np.zeros(n, np.int64) for k in ("reads", "writes", "touches")}
    progs: list[set[int]] = [set() for _ in range(n)]
    first: dict[int, tuple[int, int, str]] = {}
    read_total = 0
    rows = _hbm_rows(trace, _tensors(trace)).filter(pl.col("tensor") == tensor)
    for r in rows.iter_rows(named=True):
        attrs = json.loads(r["attrs"] or "{}")
        if attrs.get("offsets") == ix.INPUT:
            continue
        shape = tuple(r["shape"])
        moved = (ix.moved(*ix.elements(attrs, shape, trace.access)) if ix.is_indexed(attrs)
                 else np.arange(int(np.prod(shape))))
        e = (r["addr"] - r["t_addr"]) // DTYPES[r["dtype"]].itemsize + moved
        read_total += len(e) * r["read"]
        e = e[(e >= 0) & (e < n)]
        np.add.at(got["touches"], e, 1)
        np.add.at(got["reads"], e, int(r["read"]))
        np.add.at(got["writes"], e, int(r["write"]))
        for k in set(e.tolist()):
            progs[k].add(r["program"])
            first[k] = min(first.get(k, (1 << 62, 0, "")), (r["program"], r["op_id"], r["src"]))
    got["programs"] = np.array([len(p) for p in progs], np.int64)
    got["owner"] = [first[k][0] if k in first else None for k in range(n)]
    got["site"] = [first[k][2] if k in first else None for k in range(n)]
    item = DTYPES[t["dtype"]].itemsize
    got["bytes_used"], got["bytes_read"] = int((got["reads"] > 0).sum()) * item, read_total * item
    return got


def _repeats(tmp_path) -> Any:
    """The version-2 fuzz base trace with elements repeated within a tile: its strided load
    over a [2, 3, 4] tile of strides [1, 0, 1] (overlapping rows, each repeated), its masked
    load of stride 0."""
    import json

    from tests.fuzz.corrupt_v2 import _ops, base_case, make

    def repeat(rows: list[dict]) -> None:
        for r in rows:
            attrs = json.loads(r["attrs"] or "{}")
            if r["name"] != "dma_read" or "strides" not in attrs:
                continue
            if "mask" in attrs:
                attrs["strides"] = [0]
            else:
                r["inputs"][0]["shape"] = r["output"]["shape"] = [2, 3, 4]
                attrs["strides"] = [1, 0, 1]
            r["attrs"] = json.dumps(attrs)

    base = kb.record(base_case(), out=tmp_path / "base.ktrace").path
    return kb.Trace.open(make(_ops(repeat), base, tmp_path / "repeats.ktrace"))


@pytest.mark.parametrize("chunk", [5, 1 << 20], ids=["small-chunks", "one-chunk"])
@pytest.mark.parametrize("which", ["grouped", "edges", "tma", "repeats"])
def test_access_map_and_traffic_equal_a_per_element_reference(replayed, tmp_path, which,
                                                              chunk, monkeypatch) -> None:
    """Also with the rows expanded a few elements at a time (``footprint.CHUNK``): counts
    carried across chunks."""
    from kernbench.analyze import footprint

    monkeypatch.setattr(footprint, "CHUNK", chunk)
    trace = (_repeats(tmp_path) if which == "repeats" else
             _trace({"grouped": GROUPED, "edges": EDGES, "tma": TMA}[which], replayed))
    traffic = {r["tensor"]: r for r in tensor_traffic(trace).iter_rows(named=True)}
    for t in traffic:
        want, got = _reference(trace, t), access_map(trace, t)
        for k in ("reads", "writes", "touches", "programs"):
            np.testing.assert_array_equal(got[k].to_numpy(), want[k], err_msg=f"{t} {k}")
        assert got["owner"].to_list() == want["owner"] and got["site"].to_list() == want["site"]
        assert (traffic[t]["bytes_used"], traffic[t]["bytes_read"]) == (
            want["bytes_used"], want["bytes_read"]), t
        long = element_accesses(trace, t)
        assert long.height == int(want["touches"].sum()), t
