"""kb.record: the trace directory, determinism, atomicity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.kernels.registry import build_case
from kernbench.schemas.arrow import OPS, TENSORS
from kernbench.trace import file_sha256


def test_scale_exp_writes_manifest_ops_and_tensors_with_every_contract_column(tmp_path):
    out = tmp_path / "s.ktrace"
    trace = kb.record(build_case("scale-exp"), out)
    assert sorted(os.listdir(out)) == ["manifest.json", "ops.parquet", "stream.parquet",
                                       "tensors.parquet"]
    ops = pq.read_table(out / "ops.parquet")
    assert ops.schema.names == OPS.names
    assert pq.read_table(out / "tensors.parquet").schema.names == TENSORS.names
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("format", "schema_version", "kernbench_version", "case", "kernel", "params",
                "grid", "hw", "n_ops", "t_end_ps", "files"):
        assert key in manifest
    assert manifest["kernel"] == "kernbench.kernels.examples:scale_exp"
    assert manifest["n_ops"] == ops.num_rows == trace.n_ops
    assert manifest["t_end_ps"] == max(ops.column("t_end_ps").to_pylist())
    assert manifest["files"]["ops.parquet"] == file_sha256(out / "ops.parquet")
    assert manifest["hw"]["hbm_gbps"] == 128 and manifest["hw"]["n_pe"] == 8
    assert ops.column("op_id").to_pylist() == list(range(ops.num_rows))


@pytest.mark.parametrize("name", ["scale-exp", "gemm", "softmax"])
def test_two_recordings_give_byte_identical_ops_parquet(tmp_path, name):
    a = kb.record(build_case(name), tmp_path / "a.ktrace")
    b = kb.record(build_case(name), tmp_path / "b.ktrace")
    assert (a.path / "ops.parquet").read_bytes() == (b.path / "ops.parquet").read_bytes()
    assert (a.path / "tensors.parquet").read_bytes() == (b.path / "tensors.parquet").read_bytes()


@kb.kernel
def dies_midway(x, *, after: int):
    for _i in range(after):
        tl.exp(tl.load(x, (4,), tl.float32))
    raise RuntimeError("kernel bug")


def test_a_kernel_that_raises_midway_leaves_no_trace_and_no_temporary(tmp_path):
    case = kb.Case("dies", dies_midway, (2,), {"x": kb.tensor((4,), "float32")}, {"after": 5})
    with pytest.raises(RuntimeError, match="kernel bug"):
        kb.record(case, tmp_path / "d.ktrace")
    assert os.listdir(tmp_path) == []


def test_a_failed_rerecording_keeps_the_previous_trace(tmp_path):
    out = tmp_path / "s.ktrace"
    kb.record(build_case("scale-exp"), out)
    before = (out / "ops.parquet").read_bytes()
    case = kb.Case("dies", dies_midway, (1,), {"x": kb.tensor((4,), "float32")}, {"after": 1})
    with pytest.raises(RuntimeError):
        kb.record(case, out)
    assert (out / "ops.parquet").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["s.ktrace"]


def test_refuses_to_overwrite_a_directory_that_is_not_a_trace(tmp_path):
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(kb.BadInputError, match="exists and is not a trace"):
        kb.record(build_case("scale-exp"), tmp_path / "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"


def test_rows_stream_in_record_batches(tmp_path, monkeypatch):
    from kernbench.record.rows import writer

    monkeypatch.setattr(writer, "BATCH_ROWS", 1000)
    trace = kb.record(build_case("small-ops", {"iters": 500}), tmp_path / "m.ktrace")
    meta = pq.ParquetFile(trace.path / "ops.parquet").metadata
    assert trace.n_ops == 3502
    assert meta.num_row_groups == 4  # flushed every 1000 rows, memory flat in the op count


def test_record_accepts_hw_as_preset_config_or_toml(tmp_path):
    toml = tmp_path / "slow.toml"
    toml.write_text('hbm_gbps = 64\nname = "slow"\n')
    fast = kb.record(build_case("scale-exp"), tmp_path / "f.ktrace", hw="ahbm-v1")
    slow = kb.record(build_case("scale-exp"), tmp_path / "s.ktrace", hw=toml)
    assert slow.manifest["hw"]["hbm_gbps"] == 64 and slow.manifest["hw"]["name"] == "slow"
    assert slow.t_end_ps > fast.t_end_ps


def test_trace_open_reads_ops_as_polars(tmp_path):
    kb.record(build_case("scale-exp"), tmp_path / "s.ktrace")
    trace = kb.Trace.open(tmp_path / "s.ktrace")
    assert trace.ops.height == trace.n_ops
    assert set(trace.ops["kind"].cast(str).unique()) == {"memory", "math", "scope"}


def test_non_scalar_params_are_rejected(tmp_path):
    case = kb.Case("bad", dies_midway, (1,), {"x": kb.tensor((4,), "float32")}, {"after": [1]})
    with pytest.raises(kb.BadInputError, match=r"case param after=\[1\]"):
        kb.record(case, tmp_path / "x.ktrace")
    assert not any(Path(tmp_path).iterdir())


def test_progress_is_reported_after_every_batch(tmp_path, monkeypatch):
    from kernbench.record.rows import writer

    monkeypatch.setattr(writer, "BATCH_ROWS", 500)
    seen: list[int] = []
    trace = kb.record(build_case("small-ops", {"iters": 200}), tmp_path / "p.ktrace",
                      progress=seen.append)
    assert seen == [500, 1000] + [trace.n_ops]
