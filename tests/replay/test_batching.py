"""Batching in replay (replay/batching.py): identical ops of different programs run as one
numpy call, and nothing about a replay can tell: verdicts, outputs and values.parquet are
the same bytes as one op at a time; a run where one member reads what another wrote is
not batched."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
from tests.replay.conftest import op, operand, write_trace

import kernbench as kb
from kernbench import tl
from kernbench.replay import batching, engine
from kernbench.replay.session import replay_in_process
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import Op


@kb.kernel
def tiles(x, w, y, *, n_tiles: int, rows: int, cols: int, blocks: int):
    pid = tl.program_id(0)
    wt = tl.load(w, (1, cols), tl.float32)
    for j in range(n_tiles):
        with tl.scratch_scope():
            off = ((pid * n_tiles + j) % blocks) * rows * cols
            a = tl.load(x + off, (rows, cols), tl.float32)
            b = tl.exp(a * 0.5) + wt
            c = b - tl.max(b, axis=1, keepdims=True)
            s = tl.sum(c, axis=0, keepdims=True)
            tl.store(y + off, c * 2.0 + s)


def tiles_case(programs: int = 5, n_tiles: int = 3, blocks: int = 7) -> kb.Case:
    """Tiles cycle over ``blocks`` row blocks: the programs' HBM reads are not evenly
    spaced (gathered), their TCM operands are (one strided view)."""
    rows, cols = 4, 48
    return kb.Case(
        name="batching-tiles", kernel=tiles, grid=(programs,),
        tensors={"x": kb.tensor((blocks * rows, cols), "float32", init=kb.randn(seed=0)),
                 "w": kb.tensor((1, cols), "float32", init=kb.randn(seed=1)),
                 "y": kb.tensor((blocks * rows, cols), "float32", role="output")},
        params={"n_tiles": n_tiles, "rows": rows, "cols": cols, "blocks": blocks})


def _files(path: Path) -> dict[str, str]:
    return {f: hashlib.sha256((path / "replay" / f).read_bytes()).hexdigest()
            for f in ("values.parquet", "outputs.parquet")}


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], dict, dict]:
    """Replay with batching off, then on: (members per batch made, result of each)."""
    made: list[int] = []
    build = batching.build

    def counting(*args, **kwargs):
        got = build(*args, **kwargs)
        made.append(len(args[2]) if got is not None else 0)
        return got

    monkeypatch.setattr(batching, "build", counting)
    out = {}
    for on in (False, True):
        monkeypatch.setattr(engine, "BATCH", on)
        res = replay_in_process(path, reference=False, threads=1, progress=False)
        verdict = {k: v for k, v in res.verdict.items() if k not in ("run_id", "replay_s")}
        out[on] = {"verdict": verdict, "files": _files(path),
                   "outputs": {k: v.tobytes() for k, v in res.outputs.items()}}
    return made, out[False], out[True]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("batching")
    return {"tiles": kb.record(tiles_case(), root / "tiles.ktrace").path,
            # blocks (p*6 + j) % 3: tiles 1 and 4 gather the same rows again, while the
            # first gather's values still wait for the statistics
            "repeat": kb.record(tiles_case(3, 6, 3), root / "repeat.ktrace").path,
            "softmax": kb.record(kb.build_case("softmax", {"rows": 8, "n": 64,
                                                           "programs": 4}),
                                 root / "softmax.ktrace").path}


@pytest.mark.parametrize("name", ["tiles", "repeat", "softmax"])
def test_batched_replay_is_byte_identical_to_one_op_at_a_time(
        traces: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        name: str) -> None:
    path = shutil.copytree(traces[name], tmp_path / "t.ktrace")
    made, off, on = _both(path, monkeypatch)
    # clean (no reference asked for: nothing is compared, nothing read invalid)
    assert off["verdict"]["status"] == "unverified" and off["verdict"]["n_executed"] > 0
    assert on == off
    assert max(made) >= 3  # the programs' ops did run as batches


def test_a_failing_batched_call_runs_its_members_one_at_a_time(
        traces: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = shutil.copytree(traces["tiles"], tmp_path / "t.ktrace")
    monkeypatch.setattr(engine, "BATCH", False)
    replay_in_process(path, reference=False, threads=1, progress=False)
    want = _files(path)

    def fail(self):
        raise ValueError("batched call refused")

    monkeypatch.setattr(batching.Batch, "__call__", fail)
    monkeypatch.setattr(engine, "BATCH", True)
    res = replay_in_process(path, reference=False, threads=1, progress=False)
    assert res.status == "unverified"  # clean: no reference was asked for
    assert _files(path) == want


X = np.arange(1, 9, dtype=np.float32) / 4


def _two_exps(tmp_path: Path, second_reads: int) -> Path:
    """exp of x[0:4] into y[0:4] (pe 0), then exp of the 4 floats at ``second_reads`` into
    y[4:8] (pe 1), the second starting when the first's write lands: one class of op."""
    hbm = lambda addr: operand("hbm", addr, (4,))  # noqa: E731
    ops = [op(Op.EXP, 0, 10, [hbm(0)], hbm(4096), pe=0),
           op(Op.EXP, 10, 20, [hbm(second_reads)], hbm(4096 + 16), pe=1),
           op(Op.DMA_WRITE, 30, 40, [hbm(4096)], hbm(8192))]
    return write_trace(tmp_path / "t.ktrace", ops, {
        "x": (X, "input"), "y": (np.zeros(8, np.float32), "inout"),
        "z": (np.zeros(4, np.float32), "output")})


@pytest.mark.parametrize("reads, hazard", [(16, False), (4096, True)])
def test_a_member_reading_another_members_write_is_not_batched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: int, hazard: bool) -> None:
    monkeypatch.setattr(batching, "MIN_MEMBERS", 2)
    path = _two_exps(tmp_path, reads)
    made, off, on = _both(path, monkeypatch)
    assert on == off
    y = np.frombuffer(on["outputs"]["y"], np.float32)
    np.testing.assert_array_equal(y[:4], np.exp(X[:4]))
    second = np.exp(np.exp(X[:4])) if hazard else np.exp(X[4:])
    np.testing.assert_array_equal(y[4:], second.astype(np.float32))
    assert made == ([0] if hazard else [2])


def test_runs_join_one_class_across_idle_positions_and_stop_at_landings_and_chunks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "MIN_MEMBERS", 2)
    cls = np.array([3, -2, 3, 3, 5, 5, -1, 5, 5, 5, 5, 5, 7])
    landing = np.zeros(len(cls), bool)
    landing[8] = True  # a write lands after position 8: 9 may not join 8
    deferred = np.zeros(len(cls), bool)
    deferred[2] = True
    got = batching.runs(cls, landing, deferred, chunk=11)
    assert got == [(0, 4, [0, 2, 3], False), (4, 6, [4, 5], True), (7, 9, [7, 8], True),
                   (9, 11, [9, 10], True)]  # 11: another chunk than 10


def test_runs_of_fewer_than_min_members_run_one_at_a_time() -> None:
    """Two members measured slower batched than one at a time (ADR-0710): such runs are
    not batched, runs of three or more are."""
    cls = np.array([3, -2, 3, 5, 5, 5, -1, 7, 7, 7, 7, 9, 9])
    none = np.zeros(len(cls), bool)
    assert batching.MIN_MEMBERS == 3
    assert batching.runs(cls, none, none, chunk=64) == [(3, 6, [3, 4, 5], True),
                                                       (7, 11, [7, 8, 9, 10], True)]



@kb.kernel
def rank_broadcast(x, w, y, z, *, rows: int, cols: int):
    """A row vector added to a tile (fewer axes than the output) and a tile's row minus
    its 0-d maximum: inputs that broadcast by rank, as in Triton's softmax."""
    pid = tl.program_id(0)
    wt = tl.load(w + pid * cols, (cols,), tl.float32)
    a = tl.load(x + pid * rows * cols, (rows, cols), tl.float32)
    tl.store(y + pid * rows * cols, a + wt)
    m = tl.max(wt, axis=0)
    tl.store(z + pid * cols, wt - m)


def rank_broadcast_case(programs: int = 8) -> kb.Case:
    """``programs`` equal to ``rows``: a row vector stacked over the programs, (8, 16),
    would also broadcast against the stacked tiles, (8, 8, 16), pairing programs with rows."""
    rows, cols = 8, 16

    def reference(x, w):
        t = x.reshape(programs, rows, cols) + w.reshape(programs, 1, cols)
        return {"y": t.reshape(programs * rows, cols), "z": w - w.max(axis=1, keepdims=True)}

    return kb.Case(
        name="batching-rank", kernel=rank_broadcast, grid=(programs,),
        tensors={"x": kb.tensor((programs * rows, cols), "float32", init=kb.randn(seed=0)),
                 "w": kb.tensor((programs, cols), "float32", init=kb.randn(seed=1)),
                 "y": kb.tensor((programs * rows, cols), "float32", role="output"),
                 "z": kb.tensor((programs, cols), "float32", role="output")},
        params={"rows": rows, "cols": cols}, reference=reference)


@pytest.mark.parametrize("programs", [8, 5])
def test_inputs_with_fewer_axes_batch_per_member(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, programs: int) -> None:
    """Each member's input broadcasts against its own output, never against the member axis
    (a wrong pairing is silent when the member count equals an axis); 0-d inputs batch."""
    case = rank_broadcast_case(programs)
    path = kb.record(case, tmp_path / "t.ktrace").path
    made, off, on = _both(path, monkeypatch)
    assert on == off and off["verdict"]["status"] == "unverified"
    assert made.count(programs) >= 4  # loads, the add, the max, the 0-d subtraction
    res = replay_in_process(path, lambda **_: case, threads=1, progress=False)
    assert res.verified, res.verdict
    x, w = (case.tensors[n].init.make(case.tensors[n].shape, DTYPES["float32"])
            for n in ("x", "w"))
    want = case.reference(x, w)
    for name in ("y", "z"):
        np.testing.assert_array_equal(res.outputs[name], want[name])


def test_a_reduction_to_one_element_per_member_batches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row's maximum is (1,) per member; stacked, the op table infers (M,) for it, not
    (M, 1): the stacked output is viewed as inferred, and the values are the same bytes."""
    path = kb.record(rank_broadcast_case(6), tmp_path / "t.ktrace").path
    built: list[tuple[Op, bool]] = []
    build = batching.build

    def recording(op, *args, **kwargs):
        got = build(op, *args, **kwargs)
        built.append((op, got is not None))
        return got

    monkeypatch.setattr(batching, "build", recording)
    _, off, on = _both(path, monkeypatch)
    assert on == off and off["verdict"]["status"] == "unverified"
    assert (Op.MAX, True) in built


@pytest.mark.parametrize("at", [(0, 1, 2, 3), (0, 1, 3, 7)])
def test_0d_operands_batch_and_broadcast_per_member(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: tuple[int, ...]) -> None:
    """x[4i:4i+4] - s[at[i]] on PE i, s[at[i]] a 0-d operand: evenly spaced scalars are
    one strided view, others are gathered; each member's scalar meets its own row."""
    rows = [op(Op.SUB, 0, 10, [operand("hbm", 16 * i, (4,)),
                               operand("hbm", 4096 + 4 * at[i], ())],
               operand("hbm", 8192 + 16 * i, (4,)), pe=i) for i in range(4)]
    s = np.arange(1, 9, dtype=np.float32) * 10
    x = (np.arange(16, dtype=np.float32) - 8) / 8
    path = write_trace(tmp_path / "t.ktrace", rows, {
        "x": (x, "input"), "s": (s, "input"), "y": (np.zeros(16, np.float32), "output")})
    made, off, on = _both(path, monkeypatch)
    assert on == off and off["verdict"]["status"] == "unverified" and made == [4]
    want = x.reshape(4, 4) - s[list(at)][:, None]
    np.testing.assert_array_equal(np.frombuffer(on["outputs"]["y"], np.float32),
                                  want.reshape(-1))
