"""Triton figures for ``kernbench bench`` (docs/triton.md): kernbench against Triton's
interpreter on the same unmodified kernel and the same inputs.

``triton_matmul_*``: the grouped-ordering matmul, 512 x 512 x 512 fp16 in 64 x 64 x 32
blocks; ``triton_softmax_*``: the fused row softmax of 1024 x 1024 float32 (one program per
row). Our side, ``*_s``: ``kb.record`` + a replay verified against the numpy reference
(``replay_in_process``, reference on), best of ``repeat``. Their side,
``*_interpreter_s``: one ``kernel[grid](...)`` launch under ``TRITON_INTERPRET=1`` on torch
CPU tensors, best of ``repeat``, in a process of its own. ``*_vs_interpreter`` is ours over
theirs (like ``replay_vs_numpy``; 0.1 is ten times faster). ``*_process_s`` and
``*_interpreter_process_s`` are whole processes as a user runs them: ``kernbench record`` then
``kernbench replay`` (two CLI processes and the replay child) against a Python process that
imports torch and triton, builds the inputs and launches once. One BLAS thread on both sides.
``*_max_abs_diff``: our replayed output against the interpreter's. Without torch or triton
installed the interpreter side is skipped, with a note under ``triton_interpreter``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import kernbench as kb
from kernbench.case.triton_hook import install
from kernbench.triton import case as triton_case

install()  # the kernels below are Triton source: the stand-in where no triton is installed
import triton  # noqa: E402  # type: ignore[import-untyped]
import triton.language as tl  # noqa: E402  # type: ignore[import-untyped]


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr,
                  BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(input_ptr + row_idx * input_row_stride + col_offsets, mask=mask,
                  other=-float("inf"))
    numerator = tl.exp(row - tl.max(row, axis=0))
    out = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row_idx * output_row_stride + col_offsets, out, mask=mask)


def matmul_launch(size: int = 512, block_m: int = 64, block_n: int = 64, block_k: int = 32,
                  group_m: int = 8, seed: int = 0) -> tuple[Any, tuple, tuple, dict]:
    """(kernel, grid, args, meta) of one matmul launch, numpy arguments."""
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((size, size), dtype=np.float32).astype(np.float16)
            for _ in range(2))
    c = np.zeros((size, size), np.float16)
    grid = (triton.cdiv(size, block_m) * triton.cdiv(size, block_n),)
    meta = {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
            "GROUP_SIZE_M": group_m}
    return matmul_kernel, grid, (a, b, c, size, size, size, size, 1, size, 1, size, 1), meta


def softmax_launch(rows: int = 1024, cols: int = 1024, seed: int = 0
                   ) -> tuple[Any, tuple, tuple, dict]:
    x = np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32)
    out = np.zeros((rows, cols), np.float32)
    block = 1 << max(cols - 1, 0).bit_length()
    return softmax_kernel, (rows,), (out, x, cols, cols, cols), {"BLOCK_SIZE": block}


def _matmul_reference(a_ptr: np.ndarray, b_ptr: np.ndarray, **_: Any) -> dict[str, Any]:
    return {"c_ptr": (a_ptr.astype(np.float32) @ b_ptr.astype(np.float32)).astype(np.float16)}


def _softmax_reference(input_ptr: np.ndarray, **_: Any) -> dict[str, Any]:
    e = np.exp(input_ptr - input_ptr.max(axis=1, keepdims=True))
    return {"output_ptr": e / e.sum(axis=1, keepdims=True)}


def matmul_case(size: int = 512, block_m: int = 64, block_n: int = 64, block_k: int = 32,
                group_m: int = 8, seed: int = 0) -> kb.Case:
    kernel, grid, args, meta = matmul_launch(size, block_m, block_n, block_k, group_m, seed)
    return triton_case(kernel, grid, *args, name="bench-triton-matmul",
                    reference=_matmul_reference, **meta)


def softmax_case(rows: int = 1024, cols: int = 1024, seed: int = 0) -> kb.Case:
    kernel, grid, args, meta = softmax_launch(rows, cols, seed)
    return triton_case(kernel, grid, *args, name="bench-triton-softmax",
                    reference=_softmax_reference, **meta)


#: workload -> (launch function, case factory, output argument index, output name)
WORKLOADS = {"matmul": ("matmul_launch", "matmul_case", 2, "c_ptr"),
             "softmax": ("softmax_launch", "softmax_case", 0, "output_ptr")}
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "KERNBENCH_REPLAY_THREADS": "1"}


def interpreter_child(workload: str, params: str, repeat: str, out: str) -> None:
    """In ``python -c`` with ``TRITON_INTERPRET=1``: launch ``repeat`` times on torch CPU
    tensors, print the best launch time, save the output of the last launch to ``out``."""
    import torch

    torch.set_num_threads(1)
    launch, _, index, _ = WORKLOADS[workload]
    kernel, grid, args, meta = globals()[launch](**json.loads(params))
    times = []
    for _ in range(int(repeat)):
        targs = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
        t0 = time.perf_counter()
        kernel[grid](*targs, **meta)
        times.append(time.perf_counter() - t0)
    np.save(out, targs[index].numpy())
    print(json.dumps({"launch_s": min(times)}))


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:  # pragma: no cover - a failed side makes the figures meaningless
        raise RuntimeError(f"bench: {' '.join(cmd[:4])} failed: {proc.stderr[-2000:]}")
    return wall, proc.stdout


def _env(**extra: str) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **ONE_THREAD, "PYTHONPATH": path, **extra}


def _ours(workload: str, params: dict[str, Any], tmp: Path, repeat: int
          ) -> tuple[float, np.ndarray]:
    """Best of ``repeat``: record + a replay verified against the reference."""
    from kernbench.replay.runner import replay_in_process
    from kernbench.replay.threads import blas_threads

    factory = globals()[WORKLOADS[workload][1]]
    best, outputs = float("inf"), np.empty(0)
    with blas_threads(1):
        for i in range(repeat):
            path = tmp / f"{workload}-{i}.ktrace"
            t0 = time.perf_counter()
            kb.record(kb.build_case(f"bench-{workload}", params, factory=factory), path)
            res = replay_in_process(path, factory, threads=1, progress=False)
            best = min(best, time.perf_counter() - t0)
            if not res.ok:  # pragma: no cover - a benchmark of a wrong replay is meaningless
                raise AssertionError(f"bench {workload}: replay not verified: {res.verdict}")
            outputs = res.outputs[WORKLOADS[workload][3]]
    return best, outputs


def _our_processes(workload: str, params: dict[str, Any], tmp: Path) -> float:
    spec = f"kernbench.bench.triton_interpreter:{WORKLOADS[workload][1]}"
    cli = [sys.executable, "-m", "kernbench.cli"]
    items = [x for k, v in params.items() for x in ("-p", f"{k}={v}")]
    path = tmp / f"{workload}-cli.ktrace"
    rec, _ = _run([*cli, "record", spec, *items, "-o", str(path)], _env(), tmp)
    rep, _ = _run([*cli, "replay", str(path), "--case", spec], _env(), tmp)
    return rec + rep


def _theirs(workload: str, params: dict[str, Any], tmp: Path, repeat: int
            ) -> tuple[float, float, np.ndarray]:
    """(best launch, whole process of one launch, output) under Triton's interpreter."""
    out = tmp / f"{workload}-interpreter.npy"
    code = ("import sys; from kernbench.bench.triton_interpreter import interpreter_child as f; "
            "f(*sys.argv[1:])")
    env = _env(TRITON_INTERPRET="1")
    _, stdout = _run([sys.executable, "-c", code, workload, json.dumps(params), str(repeat),
                      str(out)], env, tmp)
    launch_s = json.loads(stdout.strip().splitlines()[-1])["launch_s"]
    process_s, _ = _run([sys.executable, "-c", code, workload, json.dumps(params), "1",
                         str(out)], env, tmp)
    return launch_s, process_s, np.load(out)


def interpreter_available() -> str | None:
    """None when torch and the real triton are installed, else why not."""
    ours = str(Path(kb.__file__).resolve().parent)
    where = getattr(triton, "__file__", None)
    real = isinstance(where, str) and not str(Path(where).resolve()).startswith(ours)
    missing = ([] if importlib.util.find_spec("torch") else ["torch"]) + (
        [] if real else ["triton"])
    return f"{' and '.join(missing)} not installed: interpreter comparison skipped" \
        if missing else None


def measure(quick: bool = False, repeat: int = 3) -> dict[str, Any]:
    """The triton section of ``kernbench bench`` (``quick`` shrinks both workloads)."""
    sizes = {"matmul": {"size": 128 if quick else 512},
             "softmax": {"rows": 128 if quick else 1024, "cols": 1024}}
    note = interpreter_available()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kernbench-bench-triton-") as tmp:
        for workload, params in sizes.items():
            key = f"triton_{workload}"
            ours, output = _ours(workload, params, Path(tmp), repeat)
            result[f"{key}_s"] = round(ours, 4)
            result[f"{key}_process_s"] = round(_our_processes(workload, params, Path(tmp)), 3)
            if note is not None:
                continue
            launch, process, theirs = _theirs(workload, params, Path(tmp), repeat)
            result.update({
                f"{key}_interpreter_s": round(launch, 4),
                f"{key}_interpreter_process_s": round(process, 3),
                f"{key}_vs_interpreter": round(ours / launch, 4),
                f"{key}_process_vs_interpreter": round(
                    result[f"{key}_process_s"] / process, 3),
                f"{key}_max_abs_diff": float(np.max(np.abs(
                    output.astype(np.float64) - theirs.astype(np.float64)))),
            })
    if note is not None:
        result["triton_interpreter"] = note
    return result
