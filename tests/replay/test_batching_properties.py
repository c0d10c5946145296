"""Property test of batching in replay (replay/batching.py, ADR-0590, ADR-0670): random
small kernels run by several programs on several PEs replay to the same bytes with batching
on and off (verdict, values.parquet, outputs.parquet, the outputs), and their outputs equal
a plain numpy evaluation of each program.

The programs are drawn by the differential test's ``Drawer`` (elementwise ops with
broadcasting between ``(g, d)``, ``(g, 1)``, ``(d,)``, ``(1, d)``, scalars on either side,
reductions with axis/keepdims, softmax, where, casts, dot, nested scratch scopes) over
registers loaded per program: ``x`` and ``c`` at the program's own rows (evenly spaced
HBM: one strided view when batched), ``y`` at one address for every program (a zero
stride), ``w`` a ``(d,)`` row per program (fewer axes than the tiles it meets) and ``x``
plus the program id (a scalar that differs between programs: those ops never batch
together). The grid's program count is drawn equal to ``g`` or ``d`` half of the time:
a member axis of the length of an operand axis is how a wrong pairing stays silent.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.replay.oracle import FLOATS, Numpy
from tests.replay.test_differential import Drawer, Reg, Tl, run_program

import kernbench as kb
from kernbench import tl
from kernbench.replay import engine
from kernbench.replay.session import replay_in_process
from kernbench.replay.verdict import compare
from kernbench.schemas.dtypes import DTYPES

#: the registers every program starts with: name, shape from (g, d), per program or shared
START = (("x", lambda g, d: (g, d), True), ("y", lambda g, d: (g, d), False),
         ("c", lambda g, d: (g, 1), True), ("w", lambda g, d: (d,), True))


def _replay(path: Path, batch: bool) -> dict[str, Any]:
    """A replay without a reference with batching ``batch``: what must not depend on it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "BATCH", batch)
        res = replay_in_process(path, reference=False, threads=1, progress=False)
    verdict = {k: v for k, v in res.verdict.items() if k not in ("run_id", "replay_s")}
    files = {f: hashlib.sha256((path / "replay" / f).read_bytes()).hexdigest()
             for f in ("values.parquet", "outputs.parquet")}
    return {"verdict": verdict, "files": files,
            "outputs": {k: v.tobytes() for k, v in res.outputs.items()},
            "arrays": res.outputs}


def check(programs: int, g: int, d: int, dt: str, prog: list, regs: list[Reg],
          outs: list[int]) -> None:
    """Record ``prog`` on a grid of ``programs``, replay it batched and not, compare."""
    tensors = {}
    for n, (name, shape, own) in enumerate(START):
        rows = (programs, *shape(g, d)) if own else shape(g, d)
        tensors[name] = kb.tensor(rows, dt, init=kb.randn(seed=n + 1))
    for n, k in enumerate(outs):
        tensors[f"out{n}"] = kb.tensor((programs, *regs[k].shape), regs[k].dtype,
                                       role="output")

    def kernel(*ptrs):
        pid = tl.program_id(0)
        values = []
        for ptr, (_, shape, own) in zip(ptrs, START, strict=False):
            s = shape(g, d)
            values.append(tl.load(ptr + (pid * int(np.prod(s)) if own else 0), s,
                                  DTYPES[dt]))
        values.append(values[0] + float(pid))
        run_program(prog, Tl(), values)
        for k, v in enumerate(values):
            assert (v.shape, v.dtype.name) == (regs[k].shape, regs[k].dtype), (k, v)
        for ptr, k in zip(ptrs[len(START):], outs, strict=True):
            size = int(np.prod(regs[k].shape))
            tl.store(ptr + pid * size, values[k])

    case = kb.Case("batching-property", kb.kernel(kernel), (programs,), tensors)
    inputs = case.inputs()
    want: list[list[np.ndarray]] = []
    for pid in range(programs):
        values = [inputs[name][pid] if own else inputs[name] for name, _, own in START]
        values.append(Numpy().binary("add", values[0], float(pid), dt))
        with np.errstate(all="ignore"):
            run_program(prog, Numpy(), values)
        want.append(values)
    with tempfile.TemporaryDirectory() as tmp:
        path = kb.record(case, Path(tmp) / "p.ktrace").path
        off = _replay(path, False)
        on = _replay(path, True)
    assert off["verdict"]["ok"], off["verdict"]
    arrays = on.pop("arrays")
    off.pop("arrays")
    assert on == off, prog
    for n, k in enumerate(outs):
        for pid in range(programs):
            got = compare(arrays[f"out{n}"][pid], want[pid][k], regs[k].dtype)
            assert got["ok"], (prog, pid, n, got)


def start_regs(g: int, d: int, dt: str) -> list[Reg]:
    return [*(Reg(shape(g, d), dt, 0) for _, shape, _ in START), Reg((g, d), dt, 0)]


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int, int]:
    """(programs, g, d): the program count equal to ``g`` or ``d`` half of the time."""
    g = draw(st.integers(1, 8), label="g")
    d = draw(st.integers(1, 12), label="d")
    programs = draw(st.one_of(st.sampled_from([g, d]), st.integers(2, 10)), label="programs")
    return max(programs, 2), g, d


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_batching_never_changes_a_number(data: st.DataObject) -> None:
    programs, g, d = data.draw(sizes(), label="sizes")
    dt = data.draw(st.sampled_from(FLOATS), label="dtype")
    regs = start_regs(g, d, dt)
    drawer = Drawer(data, regs)
    prog = drawer.steps(data.draw(st.integers(1, 8), label="steps"))
    outs = data.draw(st.lists(st.sampled_from(drawer.live()), min_size=1, max_size=3,
                              unique=True), label="outputs")
    check(programs, g, d, dt, prog, regs, outs)
