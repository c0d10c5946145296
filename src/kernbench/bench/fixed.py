"""Fixed costs for ``kernbench bench`` (issue 30): what a small kernel costs a user, whole.

- ``triton_add_process_record_s`` / ``triton_add_process_replay_s`` (and ``_cpu_s``): the
  README's Triton vector add (5,000 elements, ``README_ADD`` below, the module a user writes)
  as whole ``kernbench record readme_add:add_case`` and ``kernbench replay --case
  readme_add:add_case`` processes (the replay's child included), one BLAS thread, medians of
  interleaved runs; ``_cpu_s``: their CPU seconds (steadier on a loaded machine).
- ``replay_warm_small_s``: that trace replayed and verified against its ``--case`` through a
  worker of a ``kb.ReplayPool`` that has already replayed it once (median of 5): the cost of
  one more trace for ``kbt.capture``, the pytest plugin and sweeps.
- ``capture_20_small_s``: ``kbt.capture`` of 20 launches of the add kernel (1,000 elements)
  in one fresh process, each recorded, replayed in an isolated worker and written back, the
  result checked against numpy; timed from ``with kbt.capture`` to its end (the worker's
  start included; importing triton/torch is not).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernbench.bench.process import run

#: the README's "Your Triton kernel" module, as a user saves it (``readme_add.py``)
README_ADD = '''\
import numpy as np
import triton
import triton.language as tl
from kernbench import triton as kbt

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)

def add_case(n: int = 5000, block: int = 1024):        # a case factory: mymod:add_case
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    y, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    return kbt.case(add_kernel, lambda meta: (triton.cdiv(n, meta["BLOCK"]),),
                    x, y, out, n, BLOCK=block, name="add",
                    reference=lambda x_ptr, y_ptr, **_: {"out_ptr": x_ptr + y_ptr})
'''

#: one process: 20 captured launches, timed inside; prints JSON
CAPTURE_20 = '''\
import json, sys, tempfile, time
import numpy as np
import triton
import readme_add
from kernbench import triton as kbt

import resource

def cpu():
    return sum(sum(resource.getrusage(who)[:2]) for who in (resource.RUSAGE_SELF,
                                                            resource.RUSAGE_CHILDREN))

n = 1000
x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
y, out = np.ones(n, np.float32), x.copy()
with tempfile.TemporaryDirectory() as tmp:
    t0, c0 = time.perf_counter(), cpu()
    with kbt.capture(tmp) as cap:  # its replay worker is reaped at the end: CPU counted
        for _ in range(20):
            readme_add.add_kernel[(triton.cdiv(n, 256),)](out, y, out, n, BLOCK=256)
    s, c = time.perf_counter() - t0, cpu() - c0
    ok = len(cap.traces) == 20 and bool(np.allclose(out, x + 20, atol=1e-4))
print(json.dumps({"s": s, "cpu_s": c, "ok": ok}))
'''


def write_module(where: Path) -> Path:
    """``readme_add.py`` in ``where``."""
    path = where / "readme_add.py"
    path.write_text(README_ADD)
    return path


def _processes(tmp: Path, repeat: int) -> dict[str, float]:
    py = sys.executable
    record = [py, "-m", "kernbench.cli", "record", "readme_add:add_case", "-o", "add.ktrace"]
    replay = [py, "-m", "kernbench.cli", "replay", "add.ktrace", "--case",
              "readme_add:add_case"]
    got: dict[str, list[float]] = {k: [] for k in ("rec", "rec_cpu", "rep", "rep_cpu")}
    for _ in range(repeat):
        wall, cpu, _ = run(record, tmp)
        got["rec"].append(wall)
        got["rec_cpu"].append(cpu)
        wall, cpu, out = run(replay, tmp)
        if not out.startswith("verified"):  # pragma: no cover - no figure of a wrong replay
            raise AssertionError(f"bench: replay of the README add kernel: {out.strip()}")
        got["rep"].append(wall)
        got["rep_cpu"].append(cpu)
    return {k: statistics.median(v) for k, v in got.items()}


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a live process (0 where /proc is missing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # pragma: no cover - not Linux
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _warm(tmp: Path, repeat: int = 5) -> tuple[float, float]:
    """(median wall, median CPU of both processes) of one warm replay."""
    from kernbench.replay.pool import ReplayPool

    sys.path.insert(0, str(tmp))  # where the user's module is, as on their command line
    try:
        with ReplayPool() as pool:
            pool.replay(tmp / "add.ktrace", "readme_add:add_case")  # warm it up
            pid = pool.worker_pids()[0]
            times, cpus = [], []
            for _ in range(repeat):
                t0, c0 = time.perf_counter(), time.process_time() + _proc_cpu(pid)
                res = pool.replay(tmp / "add.ktrace", "readme_add:add_case")
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() + _proc_cpu(pid) - c0)
                if not res.verified:  # pragma: no cover
                    raise AssertionError(f"bench: warm replay not verified: {res.verdict}")
    finally:
        sys.path.remove(str(tmp))
    return statistics.median(times), statistics.median(cpus)


def _capture(tmp: Path) -> dict[str, float]:
    _, _, out = run([sys.executable, "-c", CAPTURE_20], tmp)
    got = json.loads(out.strip().splitlines()[-1])
    if not got["ok"]:  # pragma: no cover
        raise AssertionError("bench: kbt.capture of 20 launches wrote back wrong outputs")
    return got


def measure(quick: bool = False, repeat: int = 3) -> dict[str, Any]:
    """The fixed-cost section (``quick``: one run of each process)."""
    with tempfile.TemporaryDirectory(prefix="kernbench-bench-fixed-") as name:
        tmp = Path(name)
        write_module(tmp)
        whole = _processes(tmp, 1 if quick else repeat)
        warm, warm_cpu = _warm(tmp)
        capture = _capture(tmp)
    return {
        "triton_add_process_record_s": round(whole["rec"], 3),
        "triton_add_process_record_cpu_s": round(whole["rec_cpu"], 3),
        "triton_add_process_replay_s": round(whole["rep"], 3),
        "triton_add_process_replay_cpu_s": round(whole["rep_cpu"], 3),
        "replay_warm_small_s": round(warm, 4),
        "replay_warm_small_cpu_s": round(warm_cpu, 4),
        "capture_20_small_s": round(capture["s"], 3),
        "capture_20_small_cpu_s": round(capture["cpu_s"], 3),
    }
