"""``kernbench bench`` keys of ``retime`` (ADR-0900; figures, never timed tests).

``retime_vs_record_<workload>``: one ``kernbench retime`` process against one ``kernbench
record`` process making the same trace, side by side, whole processes (start-up and imports
included, one BLAS thread), by CPU seconds (the wall times, ``*_wall_s``, are the machine's
load as much as ours): the case recorded on ``ahbm-v3`` against its recording on ``ahbm-v2``
(the default, made first, untimed) retimed onto ``ahbm-v3``. Workloads: the Triton matmul
512³ (``triton_matmul``), the 2k pipelined prefill (``prefill_2k``: ``gqa-prefill -p S=2048
-p H_q=8 -p H_kv=1 -p schedule=pipelined``) and the 8k flagship (``flagship_8k``:
``gqa-prefill -p S=8192``; not with ``--quick``). ``retime_sweep_speedup``: a 40-point
hardware sweep of the Triton matmul (8 ``hbm_gbps`` x 5 ``math_lanes``, 2 workers) recording
every point against recording one and retiming the others (``run_sweep(retime=False)`` /
``True``); ``retime_sweep_same`` that both points tables agree (wall times aside).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernbench.bench import process

MATMUL = "kernbench.bench.triton_kernels:matmul_case"
#: key -> (case, params, quick params or None to leave it out of --quick)
WORKLOADS: dict[str, tuple[str, dict[str, Any], dict[str, Any] | None]] = {
    "triton_matmul": (MATMUL, {"size": 512}, {"size": 128}),
    "prefill_2k": ("gqa-prefill", {"S": 2048, "H_q": 8, "H_kv": 1, "schedule": "pipelined"},
                   {"S": 256, "H_q": 8, "H_kv": 1, "schedule": "pipelined"}),
    "flagship_8k": ("gqa-prefill", {"S": 8192}, None),
}


def side_by_side(case: str, params: dict[str, Any], tmp: Path, hw: str = "ahbm-v2",
                 to: str = "ahbm-v3") -> dict[str, float]:
    """Whole processes making the trace of ``case`` on ``to``: ``record`` there, and
    ``retime`` from its recording on ``hw``: (wall, CPU) seconds of each."""
    cli = [sys.executable, "-m", "kernbench.cli"]
    items = [x for k, v in params.items() for x in ("-p", f"{k}={v}")]
    source, there, out = (tmp / f"{n}.ktrace" for n in ("source", "recorded", "retimed"))
    process.run([*cli, "record", case, *items, "--hw", hw, "-o", str(source)], tmp)
    rec_wall, rec_cpu, _ = process.run([*cli, "record", case, *items, "--hw", to, "-o",
                                        str(there)], tmp)
    ret_wall, ret_cpu, _ = process.run([*cli, "retime", str(source), "--hw", to, "-o",
                                        str(out)], tmp)
    if (out / "ops.parquet").read_bytes() != (there / "ops.parquet").read_bytes():
        raise RuntimeError(f"bench retime: {case} retimed onto {to} is not its recording")
    return {"record_s": rec_cpu, "retime_s": ret_cpu, "record_wall_s": rec_wall,
            "retime_wall_s": ret_wall}


def _sweep(quick: bool) -> dict[str, Any]:
    """The 40-point hardware sweep of the Triton matmul, recorded and retimed."""
    from kernbench.sweep.builtin import resolve_spec
    from kernbench.sweep.driver import run_sweep
    from kernbench.sweep.table import WALL_COLUMNS, read_points

    spec = resolve_spec(MATMUL, [f"size={128 if quick else 512}",
                                 "hw.hbm_gbps=32,64,96,128,192,256,384,512",
                                 "hw.math_lanes=32,64,128,256,512"])
    seconds, tables = [], []
    with tempfile.TemporaryDirectory(prefix="kb-bench-retime-") as tmp:
        for retime in (False, True):
            t0 = time.perf_counter()
            summary = run_sweep(spec, Path(tmp) / f"S{retime}", workers=2, retime=retime)
            seconds.append(time.perf_counter() - t0)
            if summary.ok != summary.total:  # pragma: no cover - a failed point: no figure
                raise RuntimeError(f"bench retime sweep: {summary.failed} points failed")
            tables.append(read_points(Path(tmp) / f"S{retime}").drop(
                [*WALL_COLUMNS, "retimed_from"]))
    return {"retime_sweep_record_s": round(seconds[0], 2),
            "retime_sweep_s": round(seconds[1], 2),
            "retime_sweep_speedup": round(seconds[0] / seconds[1], 2),
            "retime_sweep_same": tables[0].equals(tables[1])}


def measure(quick: bool = False, workloads: dict[str, Any] | None = None,
            sweep: bool = True) -> dict[str, Any]:
    """The retime section (``quick`` shrinks the workloads and leaves the flagship out)."""
    result: dict[str, Any] = {}
    for key, (case, params, small) in (workloads or WORKLOADS).items():
        chosen = small if quick else params
        if chosen is None:
            continue
        with tempfile.TemporaryDirectory(prefix="kb-bench-retime-") as tmp:
            got = side_by_side(case, chosen, Path(tmp))
        result[f"retime_vs_record_{key}"] = round(got["retime_s"] / got["record_s"], 3)
        for k, v in got.items():
            result[f"{key}_{k}"] = round(v, 3)
    if sweep:
        result.update(_sweep(quick))
    return result
