"""Replaying the golden traces writes the same statistics and outputs as before replay kept
bf16 as uint16 bits (digests taken with the ml_dtypes replay of main at a6f86fb): every
checksum, min, max, mean and non-finite count of values.parquet, and every output byte."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kernbench.replay.runner import replay_in_process

TRACES = Path(__file__).resolve().parents[2] / "traces"
#: golden trace -> (values rows, digest of the values columns, digest of the outputs)
DIGESTS = {
    "flash-attn": (86, "5111effd7334f1fb", "2c18686038159002"),
    "gemm": (14, "ccfa1fbfd072e8b1", "fba62ac7d307c244"),
    "gqa-decode-composite": (92, "63a85a53651a0f6f", "ae542cc00f7ffa11"),
    "gqa-decode": (172, "e37b4cfbe77dae80", "329365a1c0222b00"),
    "gqa-prefill": (342, "aad7229c60cec229", "c69802666b0b27e6"),
    "ring-decode": (70, "f9356a72733e517c", "7835944ee82327b6"),
    "ring-prefill": (104, "01239d1697005fd8", "352b72b2d3a675dc"),
    "scale-exp": (32, "405dc0d004a7bd45", "fd9f3c391bc11556"),
    "small-ops": (102, "3fa9a9babf70a964", "03571abfe8be7809"),
    "softmax": (48, "0376991296071a62", "75255d881f8449f3"),
    "stream-sum": (26, "5a8f2ed9a4f6139b", "8650cc9cbf6898f5"),
}


def test_every_golden_trace_has_digests():
    assert set(DIGESTS) == {p.stem for p in TRACES.glob("*.ktrace")}


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_replaying_a_golden_trace_gives_the_recorded_statistics_and_outputs(tmp_path, name):
    path = tmp_path / f"{name}.ktrace"
    shutil.copytree(TRACES / f"{name}.ktrace", path)
    replay_in_process(path, reference=False, progress=False)
    values = pq.read_table(path / "replay" / "values.parquet")
    h = hashlib.sha256()
    for col in values.column_names:
        h.update(col.encode())
        h.update(values.column(col).combine_chunks().to_numpy(zero_copy_only=False).tobytes())
    outputs = pq.read_table(path / "replay" / "outputs.parquet")
    g = hashlib.sha256(b"".join(outputs.column("data").to_pylist())
                       + str(outputs.column("dtype").to_pylist()).encode())
    assert (values.num_rows, h.hexdigest()[:16], g.hexdigest()[:16]) == DIGESTS[name]
