"""Replay figures for ``kernbench bench``: ``measure()`` (never run by timed tests).

Small ops: an elementwise kernel (tiles of 8x128 float32: a load, elementwise ops with
scalars and a broadcast operand, a row reduction, a store, and the scope rows around each
tile) and flash attention in 16-row K/V tiles. ``replay_s`` is a whole in-process replay
without a reference (open + verify hashes + generate inputs + read + plan + run +
statistics + writing ``replay/``); the reference check is the user's own numpy code and is
timed apart (``replay_verify_s``). ``replay_vs_numpy`` is that time over the time plain
numpy takes for the same op sequence: every data op, in op order, as the numpy call replay
binds for it, on preallocated arrays (no validity, ordering, statistics, decoding or I/O).

Attention: ``replay_prefill_vs_numpy`` (gqa-prefill S=1024) and
``replay_decode_32k_vs_numpy`` (gqa-decode S_kv=32768) time a whole replay (no reference)
against ``bench_numpy``'s plain loop, both including the generation of their inputs, side
by side in one process with one BLAS thread. ``replay_peak_rss_mb_small``/``_large``: peak
RSS of a replay process for the small-ops kernel at 10x the ops over the same tensors.

Whole processes: ``replay_process_decode_32k_*`` and ``replay_process_prefill_1k_*`` time
``kernbench replay T`` (the command a user types: the CLI process, the isolated replay child,
the reference check, ``replay/`` written) against ``python -m kernbench.bench.numpy_baseline``
(a process importing numpy, generating the same input draws, running ``bench_numpy``'s loop
once and the reference once, comparing), interleaved, one BLAS thread on both sides, medians
of 3 (``_s`` ours, ``_numpy_s`` theirs, ``_vs_numpy`` the ratio).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import kernbench as kb
from kernbench import tl
from kernbench.bench import numpy_baseline as bench_numpy
from kernbench.replay.session import replay_in_process
from kernbench.replay.threads import blas_threads

ROWS, COLS = 8, 128


@kb.kernel
def small_ops(x, w, y, *, tiles: int, rows: int, cols: int, blocks: int):
    pid = tl.program_id(0)
    wt = tl.load(w, (1, cols), tl.float32)
    for j in range(tiles):
        with tl.scratch_scope():
            off = ((pid * tiles + j) % blocks) * rows * cols
            a = tl.load(x + off, (rows, cols), tl.float32)
            b = tl.exp(a * 0.5) + wt
            c = b - tl.max(b, axis=1, keepdims=True)
            tl.store(y + off, c * 2.0)


def small_ops_case(programs: int = 8, tiles: int = 800, blocks: int = 256) -> kb.Case:
    """About 10 ops per tile: ``programs * tiles * 10`` ops. Tiles cycle over ``blocks``
    row blocks of x and y, so the tensors stay small while the op count grows."""
    n = blocks * ROWS

    def reference(x, w):
        b = np.exp(x * np.float32(0.5)) + w
        return {"y": (b - b.max(axis=1, keepdims=True)) * np.float32(2.0)}

    return kb.Case(
        name="bench-small-ops", kernel=small_ops, grid=(programs,),
        tensors={"x": kb.tensor((n, COLS), "float32", init=kb.randn(seed=0)),
                 "w": kb.tensor((1, COLS), "float32", init=kb.randn(seed=1)),
                 "y": kb.tensor((n, COLS), "float32", role="output")},
        params={"tiles": tiles, "rows": ROWS, "cols": COLS, "blocks": blocks},
        reference=reference)


def _numpy_program(path: Path) -> list[tuple[Callable[..., Any], tuple, np.ndarray]]:
    """The trace's data ops as plain numpy calls on preallocated arrays (setup, untimed)."""

    from kernbench.replay.decode import decode
    from kernbench.replay.session import build_store, load_tensors
    from kernbench.schemas.ops import Op
    from kernbench.trace import Trace

    trace = Trace.open(path)
    store, _ = build_store(trace.manifest, load_tensors(trace.tensors_table),
                           ipcq_bytes=trace.validated().validation.ipcq_bytes)
    prog = decode(trace.ops_table, store)  # only to read operands; views are copied below
    attrs = trace.ops_table.column("attrs").to_pylist()
    arrays: dict[int, np.ndarray] = {}

    def arr(o: Any) -> np.ndarray:
        a = arrays.get(id(o))
        if a is None:
            a = arrays[id(o)] = np.array(o.view)
        return a

    def elementwise(fn: Callable[..., Any]) -> Callable[[list, dict], tuple]:
        def make(ins: list, at: dict) -> tuple:
            args = list(ins)
            for pos, value in at.get("scalars", []):
                args.insert(pos, value)
            return fn, tuple(args)
        return make

    def reduce(fn: np.ufunc) -> Callable[[list, dict], tuple]:
        return lambda ins, at: (partial(fn.reduce, axis=at["axis"], keepdims=True), (ins[0],))

    calls: dict[Op, Callable[[list, dict], tuple]] = {
        Op.DMA_READ: lambda ins, at: (np.copy, (ins[0],)),
        Op.DMA_WRITE: lambda ins, at: (np.copy, (ins[0],)),
        Op.EXP: elementwise(np.exp), Op.MUL: elementwise(np.multiply),
        Op.ADD: elementwise(np.add), Op.SUB: elementwise(np.subtract),
        Op.MAX: reduce(np.maximum), Op.SUM: reduce(np.add),
    }
    steps = []
    for i in range(len(prog)):
        make = calls.get(prog.name(i))
        if make is not None:
            fn, args = make([arr(o) for o in prog.ins[i]], json.loads(attrs[i]))
            steps.append((fn, args, arr(prog.out[i])))
    return steps


#: a whole replay without the reference, one BLAS thread, no progress line
_replay_only = partial(replay_in_process, threads=1, reference=False, progress=False)


def _run_numpy(steps: list[tuple[Callable[..., Any], tuple, np.ndarray]]) -> float:
    t0 = time.perf_counter()
    for fn, args, out in steps:
        out[...] = fn(*args)
    return time.perf_counter() - t0


def _workload(case: kb.Case, path: Path, factory: Callable[..., kb.Case], repeat: int
              ) -> dict[str, float]:
    """Record ``case``; verify one replay (untimed); time replays without a reference and
    the plain-numpy run of the same op sequence; best of ``repeat``."""
    n_ops = kb.record(case, path).n_ops
    t0 = time.perf_counter()
    checked = replay_in_process(path, factory)
    verify_s = time.perf_counter() - t0
    if not checked.verified:  # pragma: no cover - a benchmark of a wrong replay is meaningless
        raise AssertionError(f"bench replay not verified: {checked.verdict}")
    steps = _numpy_program(path)
    with blas_threads(1):
        replay_s = min(_timed(_replay_only, path) for _ in range(repeat))
        numpy_s = min(_run_numpy(steps) for _ in range(repeat))
    return {"ops": n_ops, "s": replay_s, "numpy_s": numpy_s, "verify_s": verify_s}


def _attention(case_name: str, params: dict[str, Any], loop: Callable[..., np.ndarray],
               path: Path, repeat: int) -> dict[str, float]:
    """Whole replay (no reference) vs the plain numpy loop, inputs generated on both sides;
    then the whole processes (``_processes``), reference check included."""
    case = kb.build_case(case_name, params)
    n_ops = kb.record(case, path).n_ops
    seeds = {n: (t.shape, t.init.seed) for n, t in case.tensors.items() if t.role == "input"}

    def numpy_side() -> np.ndarray:
        return loop(**bench_numpy.generate(seeds), **case.params)

    replay_s, numpy_s = [], []
    with blas_threads(1):
        for _ in range(repeat):  # interleaved, so both see the same machine load
            replay_s.append(_timed(_replay_only, path))
            numpy_s.append(_timed(numpy_side))
    whole = _processes(case, path, 1 if repeat == 1 else 3)
    return {"ops": n_ops, "s": min(replay_s), "numpy_s": min(numpy_s),
            **{f"process_{k}": v for k, v in whole.items()}}


def _processes(case: kb.Case, path: Path, repeat: int) -> dict[str, float]:
    """Medians of ``repeat`` interleaved whole processes: ``kernbench replay`` of the trace
    at ``path`` (recorded from ``case``) and the numpy baseline's process on the same case."""
    import statistics
    import sys

    from kernbench.bench.process import run

    ours = [sys.executable, "-m", "kernbench.cli", "replay", str(path)]
    theirs = [sys.executable, "-m", "kernbench.bench.numpy_baseline", bench_numpy.spec_of(case)]
    replay_s, numpy_s, replay_cpu, numpy_cpu = [], [], [], []
    for _ in range(repeat):
        wall, cpu, out = run(ours, path.parent)
        if not out.startswith("verified"):  # pragma: no cover - a wrong replay is no figure
            raise AssertionError(f"bench: kernbench replay {path}: {out.strip()}")
        replay_s.append(wall)
        replay_cpu.append(cpu)
        wall, cpu, out = run(theirs, path.parent)
        if not json.loads(out)["ok"]:  # pragma: no cover
            raise AssertionError(f"bench: the numpy baseline is wrong: {out.strip()}")
        numpy_s.append(wall)
        numpy_cpu.append(cpu)
    med = statistics.median
    return {"s": med(replay_s), "numpy_s": med(numpy_s), "cpu_s": med(replay_cpu),
            "numpy_cpu_s": med(numpy_cpu)}


def rss_child(path: str) -> None:
    """Entry point of the child process that measures the peak RSS of one replay."""
    from kernbench.bench.record import peak_rss_mb

    replay_in_process(path, reference=False, progress=False)
    print(json.dumps({"peak_rss_mb": peak_rss_mb()}))


def _replay_rss(path: Path) -> float:
    import subprocess
    import sys

    code = f"from kernbench.bench.replay import rss_child; rss_child({str(path)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["peak_rss_mb"])


def _rss(tmp: Path, tiles: int) -> dict[str, float]:
    """Peak replay RSS of the small-ops kernel at ``tiles`` and 10x ``tiles`` per program."""
    out = {}
    for label, t in (("small", tiles), ("large", tiles * 10)):
        path = tmp / f"rss-{label}.ktrace"
        n = kb.record(kb.build_case("bench-small-ops", {"programs": 8, "tiles": t},
                                    factory=small_ops_case), path).n_ops
        out[label], out[f"{label}_ops"] = _replay_rss(path), n
    return out


def measure(quick: bool = False, repeat: int = 3) -> dict[str, Any]:
    """The replay section of ``kernbench bench``.

    ``replay_*``: the small-op elementwise kernel (``programs * tiles * 10`` ops, >= 50k
    unless ``quick``). ``replay_attention_*``: flash attention in 16-row K/V tiles (tiny
    GEMMs), the library's own workload at the same scale. ``replay_prefill_*``,
    ``replay_decode_32k_*``, ``replay_peak_rss_*``: see the module docstring (``quick``
    shrinks them).
    """
    from kernbench.kernels.flash import flash_attn_case

    tiles = 80 if quick else 800
    s_kv = 4096 if quick else 40960
    with tempfile.TemporaryDirectory(prefix="kernbench-bench-") as tmp:
        small = _workload(
            kb.build_case("bench-small-ops", {"programs": 8, "tiles": tiles},
                          factory=small_ops_case), Path(tmp) / "small.ktrace",
            small_ops_case, repeat)
        attn = _workload(
            kb.build_case("flash-attn", {"s_kv": s_kv, "t_kv": 16, "t_q": 16, "d": 64}),
            Path(tmp) / "attn.ktrace", flash_attn_case, repeat)
        pre = _attention("gqa-prefill", {"S": 256 if quick else 1024}, bench_numpy.prefill,
                         Path(tmp) / "prefill.ktrace", 1 if quick else 2)
        dec = _attention("gqa-decode", {"S_kv": 4096 if quick else 32768}, bench_numpy.decode,
                         Path(tmp) / "decode.ktrace", 1 if quick else 2)
        rss = _rss(Path(tmp), 20 if quick else 800)
    return {
        "replay_ops": small["ops"],
        "replay_s": round(small["s"], 4),
        "replay_ops_per_s": round(small["ops"] / small["s"]),
        "replay_numpy_s": round(small["numpy_s"], 4),
        "replay_vs_numpy": round(small["s"] / small["numpy_s"], 3),
        "replay_verify_s": round(small["verify_s"], 4),
        "replay_attention_ops": attn["ops"],
        "replay_attention_s": round(attn["s"], 4),
        "replay_attention_numpy_s": round(attn["numpy_s"], 4),
        "replay_attention_ops_per_s": round(attn["ops"] / attn["s"]),
        "replay_attention_vs_numpy": round(attn["s"] / attn["numpy_s"], 3),
        "replay_prefill_ops": pre["ops"],
        "replay_prefill_s": round(pre["s"], 3),
        "replay_prefill_numpy_s": round(pre["numpy_s"], 3),
        "replay_prefill_vs_numpy": round(pre["s"] / pre["numpy_s"], 3),
        "replay_decode_32k_ops": dec["ops"],
        "replay_decode_32k_s": round(dec["s"], 3),
        "replay_decode_32k_numpy_s": round(dec["numpy_s"], 3),
        "replay_decode_32k_vs_numpy": round(dec["s"] / dec["numpy_s"], 3),
        **_process_keys("replay_process_decode_32k", dec),
        **_process_keys("replay_process_prefill_1k", pre),
        "replay_peak_rss_ops_small": rss["small_ops"],
        "replay_peak_rss_ops_large": rss["large_ops"],
        "replay_peak_rss_mb_small": round(rss["small"], 1),
        "replay_peak_rss_mb_large": round(rss["large"], 1),
        "replay_peak_rss_ratio": round(rss["large"] / rss["small"], 3),
    }


def _process_keys(key: str, got: dict[str, float]) -> dict[str, float]:
    """Whole-process figures of one workload: wall and CPU seconds of both sides, ratios."""
    out: dict[str, float] = {}
    for clock, tag in (("process", ""), ("process_cpu", "_cpu")):
        ours, theirs = got[f"{clock}_s"], got[f"{clock.replace('process', 'process_numpy')}_s"]
        out.update({f"{key}{tag}_s": round(ours, 3), f"{key}_numpy{tag}_s": round(theirs, 3),
                    f"{key}{tag}_vs_numpy": round(ours / theirs, 3)})
    return out


def _timed(fn: Callable[..., Any], *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0
