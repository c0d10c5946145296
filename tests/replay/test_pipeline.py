"""The streaming pipeline's stages: ordered windows, conversions, inputs, threads, progress."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import ml_dtypes
import numpy as np
import pyarrow.parquet as pq
import pytest
from tests.replay.conftest import op, operand, write_trace
from threadpoolctl import threadpool_info

from kernbench.case import Init
from kernbench.errors import BadInputError
from kernbench.replay import reader
from kernbench.replay.convert import bf16_to_f32, to_f32
from kernbench.replay.inputs import make_initial
from kernbench.replay.progress import Progress, eta_text
from kernbench.replay.threads import blas_threads, thread_count
from kernbench.schemas.dtypes import by_name
from kernbench.schemas.ops import Op


def _shuffled_trace(tmp_path: Path, n: int, seed: int) -> Path:
    """Copies with start times out of emission order (as concurrent PEs give)."""
    rng = random.Random(seed)
    ops = []
    for _ in range(n):
        t0 = rng.randint(0, 50) * 10
        ops.append(op(Op.COPY, t0, t0 + 5, [operand("hbm", 0, (4,))], operand("tcm", 0, (4,))))
    x = np.arange(4, dtype=np.float32)
    return write_trace(tmp_path / "t.ktrace", ops, {"x": (x, "input")})


@pytest.fixture(params=["whole", "cursors"])
def read_mode(request, monkeypatch):
    """Small files are decoded once; larger ones read by one streaming cursor per run."""
    if request.param == "cursors":
        monkeypatch.setattr(reader, "SMALL_FILE_ROWS", 0)
    return request.param


@pytest.mark.parametrize("batch", [1, 3, 7, 1000])
def test_windows_give_every_row_once_in_start_time_order(tmp_path: Path, batch: int,
                                                         read_mode: str) -> None:
    path = _shuffled_trace(tmp_path, 60, batch)
    got = [(s, i) for w in reader.windows(path / "ops.parquet", batch)
           for s, i in zip(w.column("t_start_ps").to_pylist(), w.column("op_id").to_pylist(),
                           strict=True)]
    table = pq.read_table(path / "ops.parquet")
    want = sorted(zip(table.column("t_start_ps").to_pylist(), table.column("op_id").to_pylist(),
                      strict=True))
    assert got == want


def test_pe_after_pe_emission_is_merged_in_bounded_windows(tmp_path: Path,
                                                           read_mode: str) -> None:
    """Four PEs' ops emitted one PE after another (as the recorder does): the runs are
    merged, and no window needs more than about one piece per run."""
    ops = [op(Op.COPY, 10 * k, 10 * k + 5, [operand("hbm", 0, (4,))],
              operand("tcm", 0, (4,), pe=pe), pe=pe) for pe in range(4) for k in range(50)]
    path = write_trace(tmp_path / "t.ktrace", ops, {"x": (np.zeros(4, np.float32), "input")})
    table = pq.read_table(path / "ops.parquet")
    pq.write_table(table, path / "ops.parquet", row_group_size=30)  # runs cross row groups
    wins = list(reader.windows(path / "ops.parquet", 8))
    sizes = [w.num_rows for w in wins]
    assert sum(sizes) == 200 and max(sizes) <= 4 * 8
    starts = [t for w in wins for t in w.column("t_start_ps").to_pylist()]
    assert starts == sorted(starts)


def test_bf16_to_f32_by_shifting_equals_the_cast_for_every_bit_pattern() -> None:
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    v = bits.view(ml_dtypes.bfloat16)
    want = v.astype(np.float32)
    got = bf16_to_f32(v)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    t = v.reshape(256, 256).T  # a strided view keeps its layout's values
    np.testing.assert_array_equal(to_f32(t), want.reshape(256, 256).T)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float16", "int32"])
@pytest.mark.parametrize("seed,scale", [(0, 1.0), (7, 0.5), (42, 3.0), (3, -1.25)])
def test_fast_randn_is_bit_identical_to_the_spec_definition(dtype: str, seed: int,
                                                           scale: float) -> None:
    init, dt = Init("randn", seed=seed, scale=scale), by_name(dtype)
    spec = (np.random.default_rng(seed).standard_normal((3, 50, 7), dtype=np.float32)
            * scale).astype(dt.np)
    got = np.zeros((3, 50, 7), dt.storage)  # replay's: in place, bf16 as uint16 bits
    make_initial(init, got, dt)
    assert init.make_storage((3, 50, 7), dt).tobytes() == got.tobytes()
    assert init.make((3, 50, 7), dt).dtype == spec.dtype
    assert got.tobytes() == spec.tobytes() == init.make((3, 50, 7), dt).tobytes()


def test_thread_count_defaults_to_one_and_rejects_nonsense(monkeypatch) -> None:
    monkeypatch.delenv("KERNBENCH_REPLAY_THREADS", raising=False)
    assert thread_count() == 1
    assert thread_count(3) == 3
    monkeypatch.setenv("KERNBENCH_REPLAY_THREADS", "2")
    assert thread_count() == 2
    for bad in (0, -1):
        with pytest.raises(BadInputError, match="positive integer"):
            thread_count(bad)
    monkeypatch.setenv("KERNBENCH_REPLAY_THREADS", "many")
    with pytest.raises(BadInputError, match="'many'"):
        thread_count()


def test_blas_pools_run_with_the_requested_threads_inside() -> None:
    with blas_threads(1):
        pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert all(p["num_threads"] == 1 for p in pools)


def test_progress_shows_done_total_rate_and_eta_and_is_silent_off_a_terminal() -> None:
    assert eta_text(50, 200, 2.0) == "50/200 ops (25%), 25 ops/s, ETA 0:06"
    out = io.StringIO()
    bar = Progress(200, stream=out)
    bar.update(200)
    bar.close()
    assert "200/200 ops (100%)" in out.getvalue()
    quiet = Progress(200, enabled=False)
    quiet.update(100)  # writes nowhere
    assert quiet.stream is None


def test_replay_threads_option_is_bad_input_when_not_positive(tmp_path: Path) -> None:
    from kernbench.replay.__main__ import main

    path = _shuffled_trace(tmp_path, 3, 0)
    assert main([str(path), "--threads", "0"]) == 2
    assert not (path / "replay").exists()
    assert main([str(path), "--threads", "2"]) == 0


def test_null_or_text_times_are_a_one_line_trace_format_error(tmp_path: Path) -> None:
    import pyarrow as pa

    from kernbench.errors import TraceFormatError

    path = _shuffled_trace(tmp_path, 4, 0)
    table = pq.read_table(path / "ops.parquet")
    k = table.schema.get_field_index("t_start_ps")
    for col in (pa.array([None, 1, 2, 3], pa.int64()), pa.array(["a", "b", "c", "d"])):
        bad = table.set_column(k, pa.field("t_start_ps", col.type), col)
        pq.write_table(bad, tmp_path / "ops.parquet")
        with pytest.raises(TraceFormatError, match="t_start_ps|corrupt"):
            list(reader.windows(tmp_path / "ops.parquet"))


def test_replay_threads_and_progress_reach_the_child_as_arguments_not_environment(
        tmp_path: Path, monkeypatch) -> None:
    """`kernbench replay --threads N` passes N on the child's command line; the CLI process's
    environment is left as it was (a CliRunner test would otherwise leak it)."""
    from click.testing import CliRunner

    from kernbench.cli import main as cli
    from kernbench.replay import child

    monkeypatch.delenv("KERNBENCH_REPLAY_THREADS", raising=False)
    seen: list[list[str]] = []
    real = child.child_command

    def spy(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(child, "child_command", spy)
    path = _shuffled_trace(tmp_path, 3, 0)
    result = CliRunner().invoke(cli, ["replay", str(path), "--threads", "2"])
    assert result.exit_code == 0, result.output
    cmd = seen[-1]
    assert cmd[cmd.index("--threads") + 1] == "2" and "--progress" not in cmd
    assert "KERNBENCH_REPLAY_THREADS" not in os.environ
    assert "--progress" in real(path, "id", progress=True)


class _CountingParquetFile(pq.ParquetFile):
    """``pq.ParquetFile`` counting the opens of each file name (the trace door opens here)."""

    opens: dict[str, int] = {}

    def __init__(self, source, *args, **kwargs) -> None:
        name = Path(str(source)).name
        self.opens[name] = self.opens.get(name, 0) + 1
        super().__init__(source, *args, **kwargs)


@pytest.fixture
def parquet_opens(monkeypatch) -> dict[str, int]:
    """Opens of each Parquet file name from here on, as counted through ``pq.ParquetFile``."""
    opens: dict[str, int] = {}
    monkeypatch.setattr(_CountingParquetFile, "opens", opens)
    monkeypatch.setattr(pq, "ParquetFile", _CountingParquetFile)
    return opens


@pytest.mark.parametrize("mode", ["decoded once", "streamed"])
def test_a_replay_opens_ops_parquet_once_through_the_opened_trace(
        tmp_path: Path, parquet_opens: dict[str, int], monkeypatch, mode: str) -> None:
    """The session opens the Trace and hands it to the pipeline: the validator's handle is the
    one the rows are read through, whether the validator kept the decoded rows or not."""
    from kernbench.replay.session import replay_in_process
    from kernbench.trace import validate

    if mode == "streamed":
        monkeypatch.setattr(validate, "SMALL_OPS_ROWS", 0)
        monkeypatch.setattr(reader, "SMALL_FILE_ROWS", 0)
    path = _shuffled_trace(tmp_path, 40, 1)
    result = replay_in_process(path, reference=False, window_rows=7, progress=False)
    assert result.verdict["n_executed"] == 40
    assert parquet_opens["ops.parquet"] == 1
    assert parquet_opens["tensors.parquet"] == 1


def test_a_version_2_replay_opens_access_parquet_once(tmp_path: Path,
                                                      parquet_opens: dict[str, int]) -> None:
    import kernbench as kb
    from kernbench.record.lowering import addressing as ix
    from kernbench.replay.session import replay_in_process

    gather = np.array([5, 0, 7, 2, 6, 1, 3, 4])  # no stride describes it: access.parquet

    @kb.kernel
    def permute(x, y):
        ix.store_indexed(y.tensor, np.arange(8), ix.load_indexed(x.tensor, gather, src="p:1"),
                         src="p:2")

    x = np.arange(8, dtype=np.float32) * 3
    case = kb.Case(name="p", kernel=permute, grid=(1,),
                   tensors={"x": kb.tensor((8,), "float32", init=kb.data(x)),
                            "y": kb.tensor((8,), "float32", role="output")})
    trace = kb.record(case, out=tmp_path / "p.ktrace")
    assert (trace.path / "access.parquet").is_file()
    parquet_opens.clear()
    result = replay_in_process(trace.path, reference=False, progress=False)
    np.testing.assert_array_equal(result.outputs["y"], x[gather])
    assert {name: parquet_opens.get(name) for name in
            ("ops.parquet", "tensors.parquet", "access.parquet")} == dict.fromkeys(
        ("ops.parquet", "tensors.parquet", "access.parquet"), 1)


def test_a_small_files_windows_decode_from_its_one_table_as_the_taken_rows(
        tmp_path: Path) -> None:
    """A small file's windows are its one table and each window's row numbers (ADR-0711);
    decoding a window from them gives the program decoding its taken rows gives."""
    from kernbench.replay.decode import decode
    from kernbench.replay.session import build_store, load_tensors
    from kernbench.trace import Trace

    rng = random.Random(3)
    ops = []
    for _ in range(90):
        t0 = rng.randint(0, 40) * 10
        pe = rng.randrange(2)
        ops.append(op(rng.choice([Op.COPY, Op.EXP]), t0, t0 + rng.choice([5, 25]),
                      [operand("hbm", 16 * rng.randrange(4), (4,))],
                      operand("tcm", 16 * rng.randrange(3), (4,), pe=pe), pe=pe))
    path = write_trace(tmp_path / "t.ktrace", ops, {"x": (np.arange(16, dtype=np.float32),
                                                          "input")})
    trace = Trace.open(path)
    held = list(reader.window_rows(path / "ops.parquet", 16))
    assert len(held) > 2 and all(table is held[0][0] for table, _ in held)
    numbers = np.concatenate([rows for _, rows in held])
    assert sorted(numbers.tolist()) == list(range(90))

    def program(p):
        rows = range(len(p))
        return ([p.op_id[r] for r in rows], [p.t_start[r] for r in rows],
                [p.t_end[r] for r in rows], [p.name(r) for r in rows],
                [p.src(r) for r in rows], [[o.describe() for o in p.ins[r]] for r in rows],
                [p.out[r].describe() for r in rows], p.order.tolist())

    stores = [build_store(trace.manifest, load_tensors(trace.tensors_table))[0]
              for _ in range(2)]
    bound: dict = {}
    for (table, rows), taken in zip(held, reader.windows(path / "ops.parquet", 16),
                                    strict=True):
        assert program(decode(table, stores[0], bound, rows=rows)) == program(
            decode(taken, stores[1]))


def test_the_collector_stays_paused_from_the_first_window_to_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paused per window only, the cyclic collector ran as each window ended (walking every
    signature bound so far); it is now paused for the whole run and restored after."""
    import gc
    import importlib

    from kernbench.replay.session import replay_in_process

    pipeline = importlib.import_module("kernbench.replay.pipeline")
    path = _shuffled_trace(tmp_path, 60, 1)
    seen = []
    real = pipeline.held_windows

    def windows(*args, **kwargs):
        for w in real(*args, **kwargs):
            seen.append(gc.isenabled())  # between windows, while the next is read
            yield w

    monkeypatch.setattr(pipeline, "held_windows", windows)
    assert gc.isenabled()
    res = replay_in_process(path, reference=False, threads=1, progress=False, window_rows=8)
    assert res.verdict["n_executed"] == 60 and len(seen) > 2 and not any(seen)
    assert gc.isenabled()
