"""Fixtures for the analysis tests: recorded traces, hand-edited copies, synthetic op logs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kernbench as kb
from kernbench.analyze.frames import ops_frame
from kernbench.kernels.registry import build_case
from kernbench.schemas.arrow import OPS, VALUES
from kernbench.schemas.ops import ENGINE, KIND, Op
from kernbench.trace import file_sha256
from kernbench.trace.replayed import FILES_KEY, replayed_files


@pytest.fixture(scope="session")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``traces(case, **params)``: a trace recorded once per session per (case, params)."""
    root = tmp_path_factory.mktemp("traces")
    made: dict[str, Path] = {}

    def get(case: str, **params: Any) -> Path:
        key = f"{case}-" + "-".join(f"{k}{v}" for k, v in sorted(params.items()))
        if key not in made:
            kb.record(build_case(case, params), root / f"{key}.ktrace")
            made[key] = root / f"{key}.ktrace"
        return made[key]

    return get


def restamp(path: Path, **manifest_updates: Any) -> None:
    """Recompute the manifest's sha256 of every data file (after a hand edit)."""
    mpath = path / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest.update(manifest_updates)
    for name in manifest["files"]:
        manifest["files"][name] = file_sha256(path / name)
    mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def write_ops(df: pl.DataFrame, path: Path) -> None:
    """Write an ops DataFrame back as a schema-exact ``ops.parquet``."""
    table = df.to_arrow()
    cols = [pa.array(table.column(f.name).to_pylist(), f.type) if pa.types.is_nested(f.type)
            else table.column(f.name).cast(f.type) for f in OPS]
    pq.write_table(pa.Table.from_arrays(cols, schema=OPS), path)


@pytest.fixture
def edit_trace(tmp_path: Path) -> Callable[..., Path]:
    """``edit_trace(src, fn, **manifest_updates)``: a copy of ``src`` whose op log is
    ``fn(ops DataFrame)``, re-stamped so it opens."""
    count = iter(range(1000))

    def edit(src: Path, fn: Callable[[pl.DataFrame], pl.DataFrame], **updates: Any) -> Path:
        dst = tmp_path / f"edited{next(count)}.ktrace"
        shutil.copytree(src, dst)
        ops = ops_frame(pq.read_table(dst / "ops.parquet"))
        write_ops(fn(ops), dst / "ops.parquet")
        restamp(dst, **updates)
        return dst

    return edit


def set_cell(df: pl.DataFrame, op_id: int, **values: Any) -> pl.DataFrame:
    """``df`` with columns of row ``op_id`` replaced."""
    hit = pl.col("op_id") == op_id
    return df.with_columns(**{k: pl.when(hit).then(pl.lit(v, df.schema[k])).otherwise(pl.col(k))
                              for k, v in values.items()})


def write_values(path: Path, checksums: dict[int, int]) -> None:
    """A ``replay/values.parquet`` with the given op_id -> checksum, and a verdict bound to
    the trace's contents (readers ignore a replay of other contents, ADR-0538)."""
    (path / "replay").mkdir(exist_ok=True)
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "replay" / "verdict.json").write_text(json.dumps(
        {"ok": True, "reference": None, FILES_KEY: replayed_files(manifest)}))
    ids = sorted(checksums)
    table = pa.Table.from_pydict({
        "op_id": ids, "checksum": [checksums[i] for i in ids], "min": [0.0] * len(ids),
        "max": [1.0] * len(ids), "mean": [0.5] * len(ids), "nonfinite": [0] * len(ids),
    }, schema=VALUES)
    pq.write_table(table, path / "replay" / "values.parquet")


def operand(space: str, addr: int, nbytes: int, pe: int = 0) -> dict[str, Any]:
    """A float32 operand of ``nbytes`` bytes (a multiple of 4)."""
    return {"space": space, "pe": pe, "addr": addr, "shape": [nbytes // 4],
            "dtype": "float32", "transposed": False}


def fake_ops(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A synthetic op log: each row needs ``name``, ``pe``, ``t`` (t_start) and ``busy``;
    optional ``end`` (t_end, default t + busy), ``ins``, ``out``, ``attrs``. op_id and seq
    follow list order."""
    seq: dict[int, int] = {}
    cols: dict[str, list[Any]] = {f.name: [] for f in OPS}
    for i, r in enumerate(rows):
        op = Op(r["name"])
        pe = r.get("pe", 0)
        seq[pe] = seq.get(pe, -1) + 1
        out = r.get("out")
        t = r["t"]
        values = {
            "op_id": i, "pe": pe, "program": pe, "seq": seq[pe], "kind": KIND[op].value,
            "name": op.value, "engine": ENGINE[op].value, "parent": r.get("parent"),
            "t_issue_ps": t, "t_start_ps": t, "t_end_ps": r.get("end", t + r["busy"]),
            "busy_ps": r["busy"], "wait_ps": 0, "inputs": r.get("ins", []), "output": out,
            "num_elements": out["shape"][0] if out else 0,
            "nbytes": out["shape"][0] * 4 if out else 0, "flops": 0, "scratch_cursor": 0,
            "scope_depth": 0, "attrs": r.get("attrs", "{}"), "src": f"k.py:{i + 1}",
        }
        for k, v in values.items():
            cols[k].append(v)
    return ops_frame(pa.Table.from_pydict(cols, schema=OPS))


def composite_ops() -> pl.DataFrame:
    """A composite GEMM on PE 0: parent row 1, two streamed tiles (dma_read to staging, dot
    into the result), after a first load of ``a``. Children are real; the parent is
    bookkeeping (engine none, busy 0) that repeats the operands."""
    a, res = operand("tcm", 0, 64), operand("tcm", 64, 128)
    b = operand("hbm", 0, 128)
    rows = [
        dict(name="dma_read", t=0, busy=10, end=50, ins=[operand("hbm", 4096, 64)], out=a),
        dict(name="gemm", t=50, busy=0, end=300, ins=[a, b], out=res),
        dict(name="dma_read", t=50, busy=10, end=100, ins=[operand("hbm", 0, 64)],
             out=operand("stage", 0, 64), parent=1),
        dict(name="dma_read", t=60, busy=10, end=110, ins=[operand("hbm", 64, 64)],
             out=operand("stage", 64, 64), parent=1),
        dict(name="dot", t=100, busy=50, ins=[a, operand("stage", 0, 64)],
             out=operand("tcm", 64, 64), parent=1),
        dict(name="dot", t=150, busy=50, ins=[a, operand("stage", 64, 64)],
             out=operand("tcm", 128, 64), parent=1),
        dict(name="exp", t=300, busy=10, ins=[res], out=operand("tcm", 256, 128)),
    ]
    df = fake_ops(rows)
    return df.with_columns(flops=pl.when(pl.col("name").is_in(["dot", "gemm"]))
                           .then(pl.lit(100, pl.Int64)).otherwise(pl.col("flops")),
                           wait_ps=pl.when(pl.col("op_id") >= 1).then(pl.lit(5, pl.Int64))
                           .otherwise(pl.col("wait_ps")))


def write_shared(path: Path, rows: list[tuple[int, str, str, int]]) -> None:
    """Add a ``shared.parquet`` (op_id, part, resource, wait_ps) of ``rows`` to
    the trace at ``path`` and list it in its manifest, as the chip-wide machine writes one on
    hardware with a shared part."""
    schema = pa.schema([
        pa.field("op_id", pa.int64(), nullable=False),
        pa.field("part", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("resource", pa.string(), nullable=False),
        pa.field("wait_ps", pa.int64(), nullable=False),
    ], metadata={b"kernbench": json.dumps({"format": "kernbench-shared",
                                           "schema_version": 1}).encode()})
    cols = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    table = pa.Table.from_arrays([pa.array(cols[0], pa.int64()),
                                  pa.array(cols[1], pa.string()).dictionary_encode(),
                                  pa.array(cols[2], pa.string()),
                                  pa.array(cols[3], pa.int64())], schema=schema)
    pq.write_table(table, path / "shared.parquet")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["shared.parquet"] = ""
    (path / "manifest.json").write_text(json.dumps(manifest))
    restamp(path)
