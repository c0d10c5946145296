"""The ``record`` section of ``kernbench bench``: record throughput, trace size, peak RSS, and
the same kernels recorded on ``ahbm-v2`` and ``ahbm-v3`` side by side (issue 37's cost of the
chip-wide machine, docs/adr/0735)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OPS_PER_ITER = 7  # small-ops: scope_enter, mul, add, mul, exp, copy, scope_exit
#: the presets recorded side by side: the PE-by-PE closed form, and the chip
PRESETS = ("ahbm-v2", "ahbm-v3")
#: key -> (case, params, quick params) recorded on each of ``PRESETS``: a chain of tiny MATH
#: ops on one PE; decode over 8 PEs (DMA, GEMM and MATH ops, the HBM stack shared on v3);
#: 512 small programs, resident 32 at a time on each PE; and, as a user records them, the
#: Triton tutorial's softmax (one program per row) and GQA flash decoding (``triton_*``: the
#: kernels of ``bench/triton_kernels.py``)
SIDE_BY_SIDE: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "small_ops": ("small-ops", {"iters": 5_000}, {"iters": 500}),
    "gqa_decode": ("gqa-decode", {"S_kv": 8192, "T_kv": 128}, {"S_kv": 1024, "T_kv": 128}),
    "softmax": ("softmax", {"rows": 4096, "n": 256, "programs": 512},
                {"rows": 512, "n": 256, "programs": 512}),
    "triton_softmax": ("triton:softmax_case", {"rows": 1024, "cols": 1024},
                       {"rows": 64, "cols": 1024}),
    "triton_decode": ("triton:decode_case", {"s_kv": 8192}, {"s_kv": 1024}),
}


def _build(case: str, params: dict[str, Any]) -> Any:
    """A built-in case, or (``triton:NAME``) a case of ``bench/triton_kernels.py``."""
    if case.startswith("triton:"):
        from kernbench.bench import triton_kernels

        return getattr(triton_kernels, case.removeprefix("triton:"))(**params)
    from kernbench.kernels.registry import build_case

    return build_case(case, params)


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


def _key(preset: str) -> str:
    return preset.replace("-", "_")


def side_by_side(quick: bool = False, repeat: int = 3) -> dict[str, Any]:
    """Each kernel of ``SIDE_BY_SIDE`` recorded on each of ``PRESETS`` in this process,
    alternately, ``repeat`` times; the best of each. Keys per kernel:
    ``record_{kernel}_ops``, ``record_{kernel}_ops_per_s_{preset}`` and
    ``record_{kernel}_v3_vs_v2`` (v3's ops/s over v2's); over all of them,
    ``record_ops_per_s_{preset}`` (the kernels' ops over their best seconds, summed) and
    ``record_v3_vs_v2``."""
    from kernbench.record.recorder import record
    from kernbench.replay.threads import blas_threads

    out: dict[str, Any] = {}
    total_ops = 0
    total_s = dict.fromkeys(PRESETS, 0.0)
    with tempfile.TemporaryDirectory(prefix="kb-record-bench-") as tmp, blas_threads(1):
        for kernel, (case, params, small) in SIDE_BY_SIDE.items():
            best = dict.fromkeys(PRESETS, float("inf"))
            n_ops = dict.fromkeys(PRESETS, 0)
            for _ in range(repeat):
                for preset in PRESETS:
                    built = _build(case, small if quick else params)
                    t0 = time.perf_counter()
                    trace = record(built, Path(tmp) / f"{kernel}-{preset}.ktrace", hw=preset)
                    best[preset] = min(best[preset], time.perf_counter() - t0)
                    n_ops[preset] = trace.n_ops
            assert len(set(n_ops.values())) == 1, f"{kernel}: op counts differ {n_ops}"
            n = n_ops[PRESETS[0]]
            out[f"record_{kernel}_ops"] = n
            for preset in PRESETS:
                out[f"record_{kernel}_ops_per_s_{_key(preset)}"] = round(n / best[preset])
                total_s[preset] += best[preset]
            out[f"record_{kernel}_v3_vs_v2"] = round(best[PRESETS[0]] / best[PRESETS[1]], 3)
            total_ops += n
    for preset in PRESETS:
        out[f"record_ops_per_s_{_key(preset)}"] = round(total_ops / total_s[preset])
    out["record_v3_vs_v2"] = round(total_s[PRESETS[0]] / total_s[PRESETS[1]], 3)
    return out


def measure(quick: bool = False) -> dict[str, Any]:
    """Record throughput and trace size on >= 100k small ops; peak RSS small vs 100x; v2 and
    v3 side by side (``side_by_side``)."""
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
        **side_by_side(quick),
    }
