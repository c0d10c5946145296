"""Fixtures for the replay tests: recorded traces, copies, and hand-written op logs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case
from kernbench.schemas.arrow import OPS, TENSORS
from kernbench.schemas.ops import ENGINE, KIND, Op
from kernbench.trace import file_sha256
from kernbench.trace.hw import HwConfig

SMALL = {"scale-exp": {"rows": 2, "n": 256, "tile": 64},
         "gemm": {"M": 64, "N": 64, "K": 32, "BM": 32, "BN": 32},
         "softmax": {"rows": 8, "n": 64, "programs": 4}}


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``recorded(case)``: a small built-in trace recorded once per session (do not modify)."""
    root = tmp_path_factory.mktemp("replay-traces")
    made: dict[str, Path] = {}

    def get(case: str) -> Path:
        if case not in made:
            made[case] = root / f"{case}.ktrace"
            kb.record(build_case(case, SMALL[case]), made[case])
        return made[case]

    return get


@pytest.fixture
def copy_of(recorded: Callable[[str], Path], tmp_path: Path) -> Callable[[str], Path]:
    """``copy_of(case)``: a private copy of a recorded trace, free to edit."""

    def get(case: str) -> Path:
        dst = tmp_path / f"{case}.ktrace"
        shutil.copytree(recorded(case), dst, ignore=shutil.ignore_patterns("replay"))
        return dst

    return get


def restamp(path: Path) -> None:
    """Recompute the manifest's sha256 of the data files after a hand edit."""
    mpath = path / "manifest.json"
    manifest = json.loads(mpath.read_text())
    for name in ("ops.parquet", "tensors.parquet"):
        manifest["files"][name] = file_sha256(path / name)
    mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def operand(space: str, addr: int, shape: tuple[int, ...], dtype: str = "float32",
            pe: int = 0, transposed: bool = False) -> dict[str, Any]:
    return {"space": space, "pe": pe, "addr": addr, "shape": list(shape), "dtype": dtype,
            "transposed": transposed}


def op(name: Op, t_start: int, t_end: int, inputs: list[dict] | None = None,
       output: dict | None = None, pe: int = 0, **attrs: Any) -> dict[str, Any]:
    """A row of a hand-written op log (op_id is filled in by ``write_trace``)."""
    return {"pe": pe, "program": pe, "seq": 0, "kind": KIND[name].value, "name": name.value,
            "engine": ENGINE[name].value, "parent": None, "t_issue_ps": t_start,
            "t_start_ps": t_start, "t_end_ps": t_end, "busy_ps": t_end - t_start,
            "wait_ps": 0, "inputs": inputs or [], "output": output, "num_elements": 0,
            "nbytes": 0, "flops": 0, "scratch_cursor": 0, "scope_depth": 0,
            "attrs": json.dumps(attrs, sort_keys=True), "src": f"synthetic.py:{t_start}"}


def write_trace(path: Path, ops: list[dict], tensors: dict[str, tuple[np.ndarray, str]],
                case: str = "synthetic", hw: HwConfig | None = None) -> Path:
    """A trace directory from hand-written rows; ``tensors``: name -> (initial, role).

    Tensors are laid out like the recorder does (declaration order, 4 KiB aligned) and
    stored as ``kb.data`` bytes, so any initial contents can be given.
    """
    path.mkdir(parents=True)
    rows = [dict(r, op_id=k, seq=k) for k, r in enumerate(ops)]
    pq.write_table(pa.Table.from_pylist(rows, schema=OPS), path / "ops.parquet")
    cols: dict[str, list] = {f: [] for f in TENSORS.names}
    addr = 0
    for name, (arr, role) in tensors.items():
        cols["name"].append(name)
        cols["role"].append(role)
        cols["pe"].append(0)
        cols["addr"].append(addr)
        cols["dtype"].append(arr.dtype.name)
        cols["shape"].append(list(arr.shape))
        cols["init"].append('{"kind": "data"}')
        cols["data"].append(arr.tobytes())
        addr += -(-arr.nbytes // 4096) * 4096
    pq.write_table(pa.Table.from_pydict(cols, schema=TENSORS), path / "tensors.parquet")
    manifest = {"format": "kernbench-trace", "schema_version": 1, "kernbench_version": "test",
                "case": case, "case_params": None, "kernel": "synthetic:kernel", "params": {},
                "grid": [1], "hw": (hw or HwConfig()).to_dict(), "n_ops": len(rows),
                "t_end_ps": max((r["t_end_ps"] for r in rows), default=0),
                "scratch_peak_bytes": 0, "files": {}}
    (path / "manifest.json").write_text(json.dumps(manifest))
    restamp(path)
    return path
