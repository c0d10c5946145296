"""Bench section: the Llama3-70B decode layer as a workload (``kb.Workload``, docs/
llama3-70b.md): batch 1 at 4k context on ahbm-v3, every kernel recorded at full shape and
its reduced slice recorded, replayed and checked — the wall seconds of recording and of
replaying, and what the layer answers (``quick``: the model reduced to a sixteenth of its
width, a smoke run)."""

from __future__ import annotations

import time
from typing import Any

QUICK = {"hidden": 512, "heads": 16, "kv_heads": 8, "head_dim": 32, "ffn": 1792,
         "vocab": 4096}


def measure(quick: bool = False) -> dict[str, Any]:
    """``workload_decode_*``: record and replay seconds, ops, layer and token time."""
    from kernbench.workload import Workload

    params: dict[str, Any] = {"batch": 1, "context": 4096, **(QUICK if quick else {})}
    t0 = time.perf_counter()
    result = Workload("llama3-70b", phase="decode", hw="ahbm-v3", **params).run()
    wall = time.perf_counter() - t0
    body = result.to_json()
    times = result.timings()
    return {"workload_decode_record_s": round(times["record_s"], 3),
            "workload_decode_replay_s": round(times["replay_s"], 3),
            "workload_decode_wall_s": round(wall, 3),
            "workload_decode_ops": sum(r["n_ops"] for r in body["rows"]),
            "workload_decode_layer_us": round(body["layer_s"] * 1e6, 3),
            "workload_decode_token_ms": round(body["token_s"] * 1e3, 3),
            "workload_decode_vs_floor": round(body["layer_s"] / body["floor_layer_s"], 4),
            "workload_decode_verified": body["verified"]}
