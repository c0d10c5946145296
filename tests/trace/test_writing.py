"""One writer door: every Parquet file kernbench writes goes through ``trace/writing.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kernbench
from kernbench.schemas.arrow import META_KEY, VALUES
from kernbench.trace import writing

SRC = Path(kernbench.__file__).parent
#: the Parquet write functions of pyarrow and polars
WRITES = frozenset({"write_table", "ParquetWriter", "write_parquet", "write_to_dataset",
                    "write_metadata", "sink_parquet"})


def _write_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            door = isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "writing"
            if name in WRITES and not door:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {name}")
    return found


def test_no_module_but_the_writer_door_calls_a_parquet_write_function() -> None:
    door = SRC / "trace" / "writing.py"
    assert _write_calls(door), "the door itself writes"
    others = [c for p in sorted(SRC.rglob("*.py")) if p != door for c in _write_calls(p)]
    assert others == []


@pytest.mark.parametrize("kind", sorted(writing.PROFILES))
def test_every_profile_writes_a_file_with_its_schema_metadata(kind: str, tmp_path: Path
                                                              ) -> None:
    table = pa.table({"op_id": pa.array([1, 2], pa.int64()),
                      "value": pa.array([b"a", b"b"], pa.binary())},
                     schema=pa.schema([("op_id", pa.int64()), ("value", pa.binary())],
                                      metadata={META_KEY: b'{"format": "x"}'}))
    writing.write_table(table, tmp_path / "t.parquet", kind)
    got = pq.read_table(tmp_path / "t.parquet")
    assert got.equals(table) and got.schema.metadata[META_KEY] == b'{"format": "x"}'
    codec = pq.ParquetFile(tmp_path / "t.parquet").metadata.row_group(0).column(0).compression
    assert codec.lower() == writing.PROFILES[kind].compression


def test_an_open_writer_stores_the_arrow_schema_and_its_metadata(tmp_path: Path) -> None:
    w = writing.open_writer(tmp_path / "values.parquet", VALUES, "values")
    w.close()
    assert pq.read_schema(tmp_path / "values.parquet").metadata[META_KEY] == (
        VALUES.metadata[META_KEY])
