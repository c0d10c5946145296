"""The ``record`` section of ``kernbench bench``: record throughput, trace size, peak RSS."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OPS_PER_ITER = 7  # small-ops: scope_enter, mul, add, mul, exp, copy, scope_exit


def _record_small_ops(iters: int, out: Path) -> tuple[float, Any]:
    from kernbench.kernels.registry import build_case
    from kernbench.record.recorder import record

    case = build_case("small-ops", {"iters": iters})
    t0 = time.perf_counter()
    trace = record(case, out)
    return time.perf_counter() - t0, trace


def peak_rss_mb() -> float:
    """This process's peak RSS in MiB: VmHWM where there is one (``ru_maxrss`` would carry
    the parent's peak over from before ``fork`` + ``exec``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_child(iters: int) -> None:
    """Entry point of the child process that measures peak RSS of one recording."""
    with tempfile.TemporaryDirectory() as tmp:
        _, trace = _record_small_ops(iters, Path(tmp) / "rss.ktrace")
        print(json.dumps({"n_ops": trace.n_ops, "peak_rss_mb": peak_rss_mb()}))


def _peak_rss(iters: int) -> dict[str, Any]:
    code = f"from kernbench.bench.record import rss_child; rss_child({iters})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(quick: bool = False) -> dict[str, Any]:
    """Record throughput and trace size on >= 100k small ops; peak RSS small vs 100x."""
    iters = 2_000 if quick else 20_000
    with tempfile.TemporaryDirectory() as tmp:
        seconds, trace = _record_small_ops(iters, Path(tmp) / "bench.ktrace")
        size = (trace.path / "ops.parquet").stat().st_size
        n_ops = trace.n_ops
    small_iters = 200 if quick else 2_000
    small, large = _peak_rss(small_iters), _peak_rss(small_iters * 100)
    return {
        "record_ops": n_ops,
        "record_ops_per_s": round(n_ops / seconds),
        "trace_bytes_per_op": round(size / n_ops, 2),
        "record_peak_rss_mb_small": round(small["peak_rss_mb"], 1),
        "record_peak_rss_mb_large": round(large["peak_rss_mb"], 1),
        "record_rss_ops_small": small["n_ops"],
        "record_rss_ops_large": large["n_ops"],
        "record_peak_rss_ratio": round(large["peak_rss_mb"] / small["peak_rss_mb"], 3),
    }
