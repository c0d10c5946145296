"""Bench section for the flagship workload: GQA decode at 32k context (docs/performance.md)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


def measure(quick: bool = False) -> dict[str, Any]:
    """Record and replay gqa-decode at S_kv = 32k (4k with ``quick``)."""
    from kernbench.analyze import metrics
    from kernbench.kernels.registry import build_case
    from kernbench.record.recorder import record
    from kernbench.replay import replay

    s_kv = 4096 if quick else 32768
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        trace = record(build_case("gqa-decode", {"S_kv": s_kv}), Path(tmp) / "d.ktrace")
        record_s = time.perf_counter() - t0
        eff = metrics(trace)["efficiency"]
        t0 = time.perf_counter()
        res = replay(trace.path)
        replay_s = time.perf_counter() - t0
    return {
        "decode_32k_s_kv": s_kv,
        "decode_32k_efficiency": round(eff, 4),
        "decode_32k_record_s": round(record_s, 3),
        "decode_32k_replay_s": round(replay_s, 3),
        "decode_32k_replay_ok": res.verified,
    }
