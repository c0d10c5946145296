"""Replaying the golden traces logs the same ops with the same non-finite counts as the
ml_dtypes replay of main at a6f86fb did, before replay kept bf16 as uint16 bits.

Only what no machine can change is pinned: which ops logged values and how many of their
elements were not finite. The float statistics and the output bytes come from numpy's exp
and the BLAS GEMM kernel, whose last bits differ between CPUs and releases (dependencies
float to their newest on a fresh machine); that the bf16 conversions are exact is
``tests/schemas/test_bf16.py``'s, bit for bit against ml_dtypes, and that the outputs are
right is the golden tests' (against the references)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kernbench.replay.session import replay_in_process

TRACES = Path(__file__).resolve().parents[2] / "traces"
#: the values.parquet columns no CPU or numpy release changes
PINNED = ("op_id", "nonfinite")
#: golden trace -> (values rows, digest of the PINNED columns)
DIGESTS = {
    "flash-attn": (86, "293fa1922d775331"),
    "gemm": (14, "a0012763d786054b"),
    "gqa-decode-composite": (92, "baf423356386f543"),
    "gqa-decode": (172, "842af3a96073d572"),
    "gqa-prefill": (342, "210b52e80592080f"),
    "ring-decode": (70, "1f6d95ed45b4eecc"),
    "ring-prefill": (104, "3d9404695326e614"),
    "scale-exp": (32, "4ee69d78790178a6"),
    "serving-decode": (280, "a7e12a931f718726"),  # issue 38, pinned by this replay
    "small-ops": (102, "85abe27e6efb4ee6"),
    "softmax": (48, "c2ded9aa10e4b153"),
    "stream-sum": (26, "ac4e96c6adecbbb6"),
}


def test_every_golden_trace_has_digests():
    assert set(DIGESTS) == {p.stem for p in TRACES.glob("*.ktrace")}


def _digest(path: Path) -> tuple[int, str]:
    """(values rows, digest of the op ids and non-finite counts) of a fresh replay."""
    replay_in_process(path, reference=False, progress=False)
    values = pq.read_table(path / "replay" / "values.parquet")
    h = hashlib.sha256()
    for col in PINNED:
        h.update(col.encode())
        h.update(values.column(col).combine_chunks().to_numpy().tobytes())
    return values.num_rows, h.hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_replaying_a_golden_trace_logs_the_recorded_ops_and_non_finite_counts(tmp_path, name):
    path = tmp_path / f"{name}.ktrace"
    shutil.copytree(TRACES / f"{name}.ktrace", path)
    assert _digest(path) == DIGESTS[name]
