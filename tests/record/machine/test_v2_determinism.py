"""ahbm-v2 traces (async engines, resident programs interleaved by clock) are byte-identical
across processes and hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kernbench as kb
from tests.triton.kernels import vector_add

ROOT = Path(__file__).resolve().parents[3]
RECORD = ("import kernbench as kb, sys; from tests.triton.kernels import vector_add; "
          "kb.record(vector_add.case(20000, 256), sys.argv[1], hw='ahbm-v2')")


def test_v2_ops_parquet_is_byte_identical_across_processes_and_hash_seeds(tmp_path) -> None:
    here = kb.record(vector_add.case(20000, 256), tmp_path / "here.ktrace", hw="ahbm-v2")
    assert here.manifest["programs_per_pe"] > 1  # resident programs do interleave
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", RECORD, str(tmp_path / "there.ktrace")], env=env,
                   check=True, cwd=ROOT)
    assert ((tmp_path / "there.ktrace" / "ops.parquet").read_bytes()
            == (here.path / "ops.parquet").read_bytes())
