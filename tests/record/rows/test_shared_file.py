"""The contention file's writer: sparse rows, sorted and merged, written once at close."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq
import pytest

from kernbench.record.rows import shared as shared_rows
from kernbench.record.rows.shared import SharedWriter
from kernbench.schemas.arrow import SHARED, SHARED_PARTS

ROWS = [(7, "link", "link.pe3->pe4", 500), (2, "hbm", "hbm.ch3", 40), (7, "issue", "issue.pe0", 20),
        (2, "hbm", "hbm.ch3", 2), (2, "hbm", "hbm.ch10", 1), (0, "tcm", "tcm.pe1", 0),
        (7, "link", "link.pe3->pe4", 1)]


def _written(tmp_path, rows, name="s.parquet"):
    writer = SharedWriter(tmp_path / name)
    for row in rows:
        writer.add(*row)
    return writer, writer.close()


def test_rows_are_sparse_sorted_and_each_key_once(tmp_path):
    _, wrote = _written(tmp_path, ROWS)
    table = pq.read_table(tmp_path / "s.parquet")
    assert wrote and table.schema.equals(SHARED, check_metadata=True)
    got = [tuple(r.values()) for r in table.to_pylist()]
    # by op, then part in SHARED_PARTS order, then resource name; repeats summed; 0 dropped
    assert got == [(2, "hbm", "hbm.ch10", 1), (2, "hbm", "hbm.ch3", 42),
                   (7, "issue", "issue.pe0", 20), (7, "link", "link.pe3->pe4", 501)]
    assert table.column("part").chunk(0).dictionary.to_pylist() == list(SHARED_PARTS)


def test_no_wait_writes_no_file(tmp_path):
    writer, wrote = _written(tmp_path, [(0, "hbm", "hbm.ch0", 0)])
    assert not wrote and not (tmp_path / "s.parquet").exists() and len(writer) == 0


def test_abort_writes_nothing(tmp_path):
    writer = SharedWriter(tmp_path / "s.parquet")
    writer.add(1, "tcm", "tcm.pe0", 5)
    writer.abort()
    assert not writer.close() and not (tmp_path / "s.parquet").exists()


def test_a_negative_wait_or_an_unknown_part_is_a_bug_of_the_machine(tmp_path):
    writer = SharedWriter(tmp_path / "s.parquet")
    with pytest.raises(AssertionError, match="waited -1 ps"):
        writer.add(0, "hbm", "hbm.ch0", -1)
    writer.add(0, "dram", "dram.ch0", 3)
    with pytest.raises(AssertionError, match=r"unknown shared parts \['dram'\]"):
        writer.close()


def test_the_file_is_the_same_bytes_held_in_chunks_or_not(tmp_path, monkeypatch):
    many = [(op % 97, SHARED_PARTS[op % 4], f"r{op % 13}", 1 + op % 5) for op in range(1000)]
    _written(tmp_path, many, "whole.parquet")
    monkeypatch.setattr(shared_rows, "CHUNK_ROWS", 7)
    _written(tmp_path, list(reversed(many)), "chunked.parquet")
    digest = [hashlib.sha256((tmp_path / n).read_bytes()).hexdigest()
              for n in ("whole.parquet", "chunked.parquet")]
    assert digest[0] == digest[1]
    total = pq.read_table(tmp_path / "whole.parquet").column("wait_ps").to_pylist()
    assert sum(total) == sum(w for *_, w in many)
