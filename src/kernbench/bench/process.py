"""Whole processes for ``kernbench bench``: one BLAS thread, this checkout importable, timed
from start to exit as a user's shell would see them."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

#: one BLAS thread in every process of a side-by-side figure
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "KERNBENCH_REPLAY_THREADS": "1"}


def env(**extra: str) -> dict[str, str]:
    """This environment with one BLAS thread and this kernbench first on PYTHONPATH."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **ONE_THREAD, "PYTHONPATH": path, **extra}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: Sequence[str], cwd: Path, extra_env: dict[str, str] | None = None
        ) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of ``cmd`` run to its end, its own processes'
    CPU time included (less sensitive to a loaded machine than the wall time); RuntimeError
    if it fails."""
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(list(cmd), env=env(**(extra_env or {})), cwd=cwd,
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if proc.returncode != 0:  # pragma: no cover - a failed side makes the figures meaningless
        raise RuntimeError(f"bench: {' '.join(cmd[:4])} failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    return wall, cpu, proc.stdout
