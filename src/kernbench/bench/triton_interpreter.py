"""Triton figures for ``kernbench bench`` (docs/triton.md): kernbench against Triton's
interpreter on the same unmodified kernel and the same inputs.

``triton_matmul_*``: the grouped-ordering matmul, 512 x 512 x 512 fp16 in 64 x 64 x 32
blocks; ``triton_softmax_*``: the fused row softmax of 1024 x 1024 float32 (one program per
row); ``triton_decode_32k_*``: GQA flash decoding over 32,768 fp16 keys (8 KV heads; one
run each side, not three: a run takes seconds). Our side, ``*_s``: ``kb.record`` of the
built case + a replay verified against the numpy reference (``replay_in_process``,
reference on: it rebuilds the case, inputs included), best of ``repeat``. Their side,
``*_interpreter_s``: one ``kernel[grid](...)`` launch under ``TRITON_INTERPRET=1`` on torch
CPU tensors, best of ``repeat``, in a process of its own. ``*_vs_interpreter`` is ours over
theirs (like ``replay_vs_numpy``; 0.1 is ten times faster). ``*_process_s`` and
``*_interpreter_process_s`` are whole processes as a user runs them: ``kernbench record`` then
``kernbench replay`` (two CLI processes and the replay child) against a Python process that
imports torch and triton, builds the inputs and launches once. One BLAS thread on both sides.
For decode, ``triton_decode_32k_vs_interpreter`` is the whole-process ratio (the speed
issue's key) and ``triton_decode_32k_in_process_vs_interpreter`` the in-process one.
``*_max_abs_diff``: our replayed output against the interpreter's. Without torch or triton
installed the interpreter side is skipped, with a note under ``triton_interpreter``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import kernbench as kb
from kernbench.bench import process
from kernbench.bench import triton_kernels as kernels

#: workload -> (launch function, case factory, output argument index, output name)
WORKLOADS = {"matmul": ("matmul_launch", "matmul_case", 2, "c_ptr"),
             "softmax": ("softmax_launch", "softmax_case", 0, "output_ptr"),
             "decode": ("decode_launch", "decode_case", 3, "o_ptr")}

def interpreter_child(workload: str, params: str, repeat: str, out: str) -> None:
    """In ``python -c`` with ``TRITON_INTERPRET=1``: launch ``repeat`` times on torch CPU
    tensors, print the best launch time, save the output of the last launch to ``out``."""
    import torch

    torch.set_num_threads(1)
    launch, _, index, _ = WORKLOADS[workload]
    kernel, grid, args, meta = getattr(kernels, launch)(**json.loads(params))
    times = []
    for _ in range(int(repeat)):
        targs = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
        t0 = time.perf_counter()
        kernel[grid](*targs, **meta)
        times.append(time.perf_counter() - t0)
    np.save(out, targs[index].numpy())
    print(json.dumps({"launch_s": min(times)}))


def _ours(workload: str, params: dict[str, Any], tmp: Path, repeat: int
          ) -> tuple[float, np.ndarray]:
    """Best of ``repeat``: record + a replay verified against the reference."""
    from kernbench.replay.session import replay_in_process
    from kernbench.replay.threads import blas_threads

    factory = getattr(kernels, WORKLOADS[workload][1])
    best, outputs = float("inf"), np.empty(0)
    with blas_threads(1):
        for i in range(repeat):
            path = tmp / f"{workload}-{i}.ktrace"
            case = kb.build_case(f"bench-{workload}", params, factory=factory)
            t0 = time.perf_counter()  # the inputs exist on both sides before the clock runs
            kb.record(case, path)
            res = replay_in_process(path, factory, threads=1, progress=False)
            best = min(best, time.perf_counter() - t0)
            if not res.verified:  # pragma: no cover - a benchmark of a wrong replay is meaningless
                raise AssertionError(f"bench {workload}: replay not verified: {res.verdict}")
            outputs = res.outputs[WORKLOADS[workload][3]]
    return best, outputs


def _our_processes(workload: str, params: dict[str, Any], tmp: Path) -> float:
    spec = f"kernbench.bench.triton_kernels:{WORKLOADS[workload][1]}"
    cli = [sys.executable, "-m", "kernbench.cli"]
    items = [x for k, v in params.items() for x in ("-p", f"{k}={v}")]
    path = tmp / f"{workload}-cli.ktrace"
    rec, _, _ = process.run([*cli, "record", spec, *items, "-o", str(path)], tmp)
    rep, _, _ = process.run([*cli, "replay", str(path), "--case", spec], tmp)
    return rec + rep


def _theirs(workload: str, params: dict[str, Any], tmp: Path, repeat: int
            ) -> tuple[float, float, np.ndarray]:
    """(best launch, whole process of one launch, output) under Triton's interpreter."""
    out = tmp / f"{workload}-interpreter.npy"
    code = ("import sys; from kernbench.bench.triton_interpreter import interpreter_child as f; "
            "f(*sys.argv[1:])")
    interpret = {"TRITON_INTERPRET": "1"}
    _, _, stdout = process.run([sys.executable, "-c", code, workload, json.dumps(params),
                                str(repeat), str(out)], tmp, interpret)
    launch_s = json.loads(stdout.strip().splitlines()[-1])["launch_s"]
    process_s, _, _ = process.run([sys.executable, "-c", code, workload, json.dumps(params),
                                   "1", str(out)], tmp, interpret)
    return launch_s, process_s, np.load(out)


def interpreter_available() -> str | None:
    """None when torch and the real triton are installed, else why not."""
    ours = str(Path(kb.__file__).resolve().parent)
    where = getattr(kernels.triton, "__file__", None)
    real = isinstance(where, str) and not str(Path(where).resolve()).startswith(ours)
    missing = ([] if importlib.util.find_spec("torch") else ["torch"]) + (
        [] if real else ["triton"])
    return f"{' and '.join(missing)} not installed: interpreter comparison skipped" \
        if missing else None


def _workloads(quick: bool) -> list[tuple[str, str, dict[str, Any], int | None, bool]]:
    """(key prefix, workload, params, repeats or None for the caller's, whether the key's
    ``_vs_interpreter`` is the whole-process ratio: the speed issue's decode key is)."""
    s_kv = 4096 if quick else 32768
    return [("triton_matmul", "matmul", {"size": 128 if quick else 512}, None, False),
            ("triton_softmax", "softmax", {"rows": 128 if quick else 1024, "cols": 1024},
             None, False),
            (f"triton_decode_{s_kv // 1024}k", "decode", {"s_kv": s_kv}, 1, True)]


def measure(quick: bool = False, repeat: int = 3) -> dict[str, Any]:
    """The triton section of ``kernbench bench`` (``quick`` shrinks the workloads)."""
    note = interpreter_available()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kernbench-bench-triton-") as tmp:
        for key, workload, params, times, by_process in _workloads(quick):
            n = times or repeat
            ours, output = _ours(workload, params, Path(tmp), n)
            ours_process = _our_processes(workload, params, Path(tmp))
            result[f"{key}_s"] = round(ours, 4)
            result[f"{key}_process_s"] = round(ours_process, 3)
            if note is not None:
                continue
            launch, theirs_process, theirs = _theirs(workload, params, Path(tmp), n)
            in_process = f"{key}_in_process" if by_process else key
            result.update({
                f"{key}_interpreter_s": round(launch, 4),
                f"{key}_interpreter_process_s": round(theirs_process, 3),
                f"{in_process}_vs_interpreter": round(ours / launch, 4),
                f"{key}_process_vs_interpreter": round(ours_process / theirs_process, 3),
                f"{key}_max_abs_diff": float(np.max(np.abs(
                    output.astype(np.float64) - theirs.astype(np.float64)))),
            })
            if by_process:
                result[f"{key}_vs_interpreter"] = result[f"{key}_process_vs_interpreter"]
    if note is not None:
        result["triton_interpreter"] = note
    return result
