"""``kernbench bench`` keys of the sweep engines (figures, never timed tests):

- ``sweep_points_per_s_1`` / ``_2``: one spec of >= 40 small points on 1 and 2 local workers,
  after an untimed warm-up sweep, alternated, best of two each
  (whole ``run_sweep`` calls, pool start-up included); ``sweep_scaling_2`` is their ratio;
- ``sweep_ray_overhead``: the same spec on a local Ray (2 CPUs) over the 2-worker pool, Ray's
  own start-up (``sweep_ray_init_s``) left out: a cluster is started once, not per sweep;
- ``sweep_driver_rss_ratio``: the driver's peak RSS over 2,000 tiny points against 200
  (each measured in a fresh process; workers are not counted).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernbench.sweep.builtin import resolve_spec
from kernbench.sweep.driver import run_sweep


def small_spec(points: int, iters: int) -> Any:
    """``points`` small-ops points around ``iters`` iterations each."""
    return resolve_spec("small-ops", ["iters=" + ",".join(str(iters + i) for i in range(points))])


def tiny_spec(points: int) -> Any:
    """``points`` (a multiple of 40) tiny small-ops points: 40 iteration counts x widths."""
    widths = ",".join(str(16 * (w + 1)) for w in range(points // 40))
    return resolve_spec("small-ops", ["iters=" + ",".join(map(str, range(1, 41))),
                                      f"width={widths}"])


def _timed(spec: Any, **kw: Any) -> float:
    with tempfile.TemporaryDirectory(prefix="kb-sweep-bench-") as tmp:
        t0 = time.perf_counter()
        summary = run_sweep(spec, Path(tmp) / "S", **kw)
        seconds = time.perf_counter() - t0
    if summary.ok != summary.total:
        raise RuntimeError(f"bench sweep: {summary.failed} points failed")
    return seconds


def rss_child(points: int) -> None:
    """Entry point of the child that measures the driver's peak RSS over ``points``."""
    from kernbench.bench.record import peak_rss_mb

    seconds = _timed(tiny_spec(points), workers=2)
    peak_mb = peak_rss_mb()  # this process's own peak (ADR-0502)
    print(json.dumps({"points": points, "peak_rss_mb": peak_mb, "seconds": seconds}))


def _driver_rss(points: int) -> dict[str, Any]:
    code = f"from kernbench.bench.sweep import rss_child; rss_child({points})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ray_overhead(spec: Any, pool_s: float) -> dict[str, Any]:
    try:
        import ray
    except ImportError:
        return {}
    from kernbench.sweep.ray_engine import init_kwargs

    t0 = time.perf_counter()
    ray.init(**init_kwargs(num_cpus=2))
    init_s = time.perf_counter() - t0
    try:
        ray_s = _timed(spec, ray="")
    finally:
        ray.shutdown()
    return {"sweep_ray_overhead": round(ray_s / pool_s, 3), "sweep_ray_s": round(ray_s, 3),
            "sweep_ray_init_s": round(init_s, 3)}


def measure(quick: bool = False) -> dict[str, Any]:
    n = 8 if quick else 40
    spec = small_spec(n, 200 if quick else 4000)
    _timed(small_spec(2, 200), workers=1)  # warm the driver (first imports), untimed
    ones, twos = [], []
    for _ in range(1 if quick else 2):  # alternated, best of each: both see the same load
        ones.append(_timed(spec, workers=1))
        twos.append(_timed(spec, workers=2))
    one, two = min(ones), min(twos)
    out: dict[str, Any] = {
        "sweep_points": n,
        "sweep_points_per_s_1": round(n / one, 3),
        "sweep_points_per_s_2": round(n / two, 3),
        "sweep_scaling_2": round(one / two, 3),
    }
    out.update(_ray_overhead(spec, two))
    small, large = (40, 200) if quick else (200, 2000)
    rs, rl = _driver_rss(small), _driver_rss(large)
    out.update({
        "sweep_driver_rss_points_small": small, "sweep_driver_rss_points_large": large,
        "sweep_driver_peak_rss_mb_small": round(rs["peak_rss_mb"], 1),
        "sweep_driver_peak_rss_mb_large": round(rl["peak_rss_mb"], 1),
        "sweep_driver_rss_ratio": round(rl["peak_rss_mb"] / rs["peak_rss_mb"], 3),
    })
    return out
