"""Bench section: the serving-style decode (``serving-decode``: paged, split-KV, decisions on
data) against the built-in ``gqa-decode`` at the same shapes — one request of 32k tokens,
Llama3-70B heads (4k with ``quick``) — record and replay time, efficiency and HBM bytes
(docs/attention-designs.md)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


def _run(case_name: str, params: dict[str, Any], path: Path) -> dict[str, Any]:
    from kernbench.analyze import metrics
    from kernbench.kernels.registry import build_case
    from kernbench.record.recorder import record
    from kernbench.replay import replay

    t0 = time.perf_counter()
    trace = record(build_case(case_name, params), path)
    record_s = time.perf_counter() - t0
    m = metrics(trace)
    t0 = time.perf_counter()
    res = replay(trace.path)
    replay_s = time.perf_counter() - t0
    ops = trace.ops
    return {"record_s": round(record_s, 3), "replay_s": round(replay_s, 3),
            "replay_ok": bool(res.ok), "efficiency": round(m["efficiency"], 4),
            "latency_ps": m["latency_ps"], "hbm_read_bytes": m["dma_read_bytes"],
            "ops": trace.manifest["n_ops"],
            "guards": int((ops["name"].cast(str) == "guard").sum())}


def measure(quick: bool = False) -> dict[str, Any]:
    """``serving_decode_*`` and ``serving_vs_gqa_decode_*`` (ours over the built-in's)."""
    s = 4096 if quick else 32768
    with tempfile.TemporaryDirectory() as tmp:
        serving = _run("serving-decode", {"batch": 1, "S_max": s}, Path(tmp) / "s.ktrace")
        gqa = _run("gqa-decode", {"S_kv": s}, Path(tmp) / "g.ktrace")
    out: dict[str, Any] = {"serving_decode_s": s}
    out.update({f"serving_decode_{k}": v for k, v in serving.items()})
    out.update({f"serving_vs_gqa_decode_{k}_gqa": v for k, v in gqa.items()
                if k in ("record_s", "replay_s", "efficiency", "latency_ps", "ops")})
    for k in ("record_s", "replay_s", "latency_ps"):
        out[f"serving_vs_gqa_decode_{k}"] = round(serving[k] / gqa[k], 3) if gqa[k] else None
    return out
