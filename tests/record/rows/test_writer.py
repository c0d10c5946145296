"""The op writer: its row shape is derived from the Arrow schema, the single source of truth;
its chunks release the per-op objects and never change the bytes written."""

from __future__ import annotations

import gc
import sys

import pyarrow.parquet as pq
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.kernels.registry import build_case
from kernbench.record.commands import Cmd
from kernbench.record.handle import TensorHandle
from kernbench.record.rows.writer import CMD_COLUMNS, DERIVED_FIELDS, ROW_FIELDS
from kernbench.schemas.arrow import OPS

writer = sys.modules["kernbench.record.rows.writer"]  # kernbench.record is shadowed by kb.record


def test_row_fields_command_columns_and_derived_fields_are_exactly_the_ops_schema():
    row_columns = [f for f in ROW_FIELDS if f != "cmd"]
    columns = row_columns + list(CMD_COLUMNS) + list(DERIVED_FIELDS)
    assert sorted(columns) == sorted(OPS.names)
    assert len(columns) == len(set(columns))
    assert set(CMD_COLUMNS.values()) <= set(Cmd._fields)
    assert ROW_FIELDS[-1] == "cmd"


def _live_handles() -> int:
    return sum(type(o) is TensorHandle for o in gc.get_objects())


SEEN: list[int] = []


@kb.kernel
def _counting(x, y, *, iters: int):
    acc = tl.load(x, (16,), tl.float32)
    for _ in range(iters):
        with tl.scratch_scope():
            tl.copy_to(acc, acc * 0.5)
    SEEN.append(_live_handles())  # every handle of the rows recorded so far, if kept
    tl.store(y, acc)


def test_the_per_op_objects_of_a_chunk_are_released_when_it_is_compacted(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "CHUNK_ROWS", 64)
    SEEN.clear()
    tensors = {"x": kb.tensor((16,), "float32"), "y": kb.tensor((16,), "float32", role="output")}
    trace = kb.record(kb.Case("count", _counting, (1,), tensors, {"iters": 1000}),
                      tmp_path / "c.ktrace")
    assert trace.n_ops == 4002  # 4 rows an iteration; each mul writes a fresh handle
    before = SEEN[0] - _live_handles()  # handles alive then, gone after the recording
    assert before < 2 * 64  # at most a chunk's worth, not the 1000 outputs so far


@pytest.mark.parametrize("chunk", [7, 64, 4096])
def test_chunking_leaves_ops_parquet_byte_identical(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(writer, "BATCH_ROWS", 50)
    case = build_case("gqa-decode", {"S_kv": 1024, "T_kv": 512, "H_q": 16, "H_kv": 2,
                                     "stream": "composite"})  # parent rows across chunks
    ref = kb.record(case, tmp_path / "ref.ktrace")
    monkeypatch.setattr(writer, "CHUNK_ROWS", chunk)
    got = kb.record(case, tmp_path / "got.ktrace")
    assert (got.path / "ops.parquet").read_bytes() == (ref.path / "ops.parquet").read_bytes()
    meta = pq.ParquetFile(got.path / "ops.parquet").metadata
    assert meta.num_row_groups == -(-got.n_ops // 50)
    parents = got.ops["parent"].drop_nulls()
    assert parents.len() > 0 and (got.ops["name"].cast(str)[parents] == "gemm").all()
