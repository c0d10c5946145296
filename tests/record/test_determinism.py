"""Point 4 of issue 11: a recording is byte-identical in any process. Dictionary codes once
followed frozenset order, so ``ops.parquet`` changed with PYTHONHASHSEED."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from kernbench.kernels.golden import GOLDEN
from kernbench.record.rows.columns import ENGINE_DICT, KIND_DICT, NAME_DICT
from kernbench.schemas.ops import Engine, Kind, Op

TRACES = Path(__file__).resolve().parents[2] / "traces"
FILES = ("ops.parquet", "tensors.parquet", "manifest.json")


def _digests(folder: Path) -> dict[str, str]:
    return {f"{name}/{f}": hashlib.sha256((folder / f"{name}.ktrace" / f).read_bytes()).hexdigest()
            for name in GOLDEN for f in FILES}


def _record_goldens(out: Path, seed: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    subprocess.run([sys.executable, "-m", "kernbench.kernels.golden", str(out)], env=env,
                   check=True, capture_output=True, timeout=300)
    return _digests(out)


def test_trust_4_every_golden_is_byte_identical_under_several_hash_seeds(tmp_path):
    seeds = ("0", "1", "2", "3")
    runs = {seed: _record_goldens(tmp_path / seed, seed) for seed in seeds}
    for seed in seeds[1:]:
        differ = sorted(k for k in runs[seed] if runs[seed][k] != runs[seeds[0]][k])
        assert not differ, f"PYTHONHASHSEED={seed} changed {differ}"
    # (no byte comparison with traces/: Parquet stamps the pyarrow version into every file,
    # and dependencies float; tests/test_golden.py compares their content)


def test_trust_4_dictionaries_follow_enum_declaration_order():
    assert NAME_DICT.to_pylist() == [op.value for op in Op]
    assert KIND_DICT.to_pylist() == [k.value for k in Kind]
    assert ENGINE_DICT.to_pylist() == [e.value for e in Engine]


def test_trust_4_written_dictionary_is_the_used_vocabulary_in_declaration_order():
    ops = pq.read_table(TRACES / "softmax.ktrace" / "ops.parquet")
    name = ops.column("name").combine_chunks()
    used = set(name.to_pylist())
    assert name.dictionary.to_pylist() == [op.value for op in Op if op.value in used]
    assert len(used) < len(Op)  # so adding an op to the table cannot change this trace
