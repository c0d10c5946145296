"""Replay throughput for ``kernbench bench``: ``measure()`` (never run by timed tests).

The workload is a kernel of many small ops (tiles of ``TILE`` float32 elements: a load, a
few elementwise ops with scalars and a broadcast operand, a row reduction, a store, and the
scope rows around each tile). ``replay_ops_per_s`` is ops per second of a whole in-process
replay (open + verify + decode + run + statistics + writing ``replay/``).
``replay_vs_numpy`` is that time over the time plain numpy takes to run the same op
sequence: every data op of the trace, in order, as the numpy call it stands for, reading
and writing preallocated arrays (no validity, ordering, statistics or I/O).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import kernbench as kb
from kernbench import tl
from kernbench.replay.runner import replay_in_process

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
    import json

    from kernbench.replay.decode import decode
    from kernbench.replay.runner import build_store, load_tensors
    from kernbench.schemas.ops import Op
    from kernbench.trace import Trace

    trace = Trace.open(path)
    store = build_store(trace.manifest, load_tensors(trace.tensors_table))
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


def _run_numpy(steps: list[tuple[Callable[..., Any], tuple, np.ndarray]]) -> float:
    t0 = time.perf_counter()
    for fn, args, out in steps:
        out[...] = fn(*args)
    return time.perf_counter() - t0


def measure(programs: int = 8, tiles: int = 800, repeat: int = 3) -> dict[str, float]:
    """Record the small-op kernel once; verify one replay against its reference (untimed);
    time ``repeat`` replays without a reference and the numpy run; report the best times."""
    with tempfile.TemporaryDirectory(prefix="kernbench-bench-") as tmp:
        path = Path(tmp) / "small.ktrace"
        case = kb.build_case("bench-small-ops", {"programs": programs, "tiles": tiles},
                             factory=small_ops_case)
        n_ops = kb.record(case, path).n_ops
        t0 = time.perf_counter()
        checked = replay_in_process(path, small_ops_case)
        verify_s = time.perf_counter() - t0
        if not checked.ok:  # pragma: no cover - a benchmark of a wrong replay is meaningless
            raise AssertionError(f"bench replay not verified: {checked.verdict}")
        replay_s = min(_timed(replay_in_process, path) for _ in range(repeat))
        steps = _numpy_program(path)
        numpy_s = min(_run_numpy(steps) for _ in range(repeat))
    return {
        "replay_ops": n_ops,
        "replay_s": round(replay_s, 4),
        "replay_ops_per_s": round(n_ops / replay_s),
        "replay_numpy_s": round(numpy_s, 4),
        "replay_vs_numpy": round(replay_s / numpy_s, 3),
        "replay_verify_s": round(verify_s, 4),
    }


def _timed(fn: Callable[..., Any], *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0
