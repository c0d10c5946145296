"""Property test of batching in replay (replay/batching.py, ADR-0590, ADR-0670): random
small kernels run by several programs on several PEs replay to the same bytes with batching
on and off (verdict, values.parquet, outputs.parquet, the outputs), and their outputs equal
a plain numpy evaluation of each program.

The programs are drawn by the differential test's ``Drawer`` (elementwise ops with
broadcasting between ``(g, d)``, ``(g, 1)``, ``(d,)``, ``(1, d)``, scalars on either side,
reductions with axis/keepdims, softmax, where, casts, dot, nested scratch scopes) over
registers loaded per program: ``x`` and ``c`` at the program's own rows (evenly spaced
HBM: one strided view when batched; or overlapping, descending, or wrapping around fewer
blocks: gathered), ``y`` at one address for every program (a zero stride), ``w`` a
``(d,)`` row per program (fewer axes than the tiles it meets), ``x`` plus the program id
(a scalar that differs between programs: those ops never batch together), ``x``
transposed, and a 0-d maximum of ``w``. One to three ops of a tile and a register of fewer
axes come first (broadcasting by rank), and the grid's program count is drawn equal to
``g`` or ``d`` half of the time: a member axis of the length of an operand axis is how a
wrong pairing stays silent (the bug ADR-0670 fixed; reverting its ``_aligned`` fails this
test within the suite's examples). The launch also varies float32/bfloat16/float16/int32,
hardware (ahbm-v1/v2, 3 or 8 PEs), replay's window and loop chunk sizes, and writes that
every program makes to one address (members that may not batch).

``KERNBENCH_HYPOTHESIS=thorough`` runs ten times the examples (a change to batching).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.replay.drawer import Drawer, Reg, Tl, broadcasts, run_program
from tests.replay.oracle import BINARY, COMPARE, FLOATS, Numpy

import kernbench as kb
from kernbench import tl
from kernbench.replay import batching, engine
from kernbench.replay.reader import BATCH_ROWS
from kernbench.replay.session import replay_in_process
from kernbench.replay.verdict import compare
from kernbench.schemas.dtypes import DTYPES, promote
from kernbench.trace.hw import HwConfig

#: the registers every program starts with: name, shape from (g, d), per program or shared
START = (("x", lambda g, d: (g, d), True), ("y", lambda g, d: (g, d), False),
         ("c", lambda g, d: (g, 1), True), ("w", lambda g, d: (d,), True))


def _replay(path: Path, batch: bool, window: int, chunk: int) -> dict[str, Any]:
    """A replay without a reference with batching ``batch``, in windows of ``window`` ops
    and loop chunks of ``chunk``: what must not depend on batching."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "BATCH", batch)
        mp.setattr(engine, "FLUSH_CHECK_EVERY", chunk)
        mp.setattr(batching, "MIN_MEMBERS", 2)  # two members batch too: the same numbers
        res = replay_in_process(path, reference=False, threads=1, progress=False,
                                window_rows=window)
    verdict = {k: v for k, v in res.verdict.items() if k not in ("run_id", "replay_s")}
    files = {f: hashlib.sha256((path / "replay" / f).read_bytes()).hexdigest()
             for f in ("values.parquet", "outputs.parquet")}
    return {"verdict": verdict, "files": files,
            "outputs": {k: v.tobytes() for k, v in res.outputs.items()},
            "arrays": res.outputs}


class Plan(NamedTuple):
    """The launch around a drawn program: ``programs`` programs run it ``iters`` times,
    each time in a scratch scope over block ``(pid * iters + j) % blocks`` of the
    per-program inputs (fewer blocks than tiles: programs read the same rows, unevenly
    spaced, gathered when batched); odd programs first compute an unused value (``skew``:
    the programs' op sequences then differ); blocks ``step`` elements apart, taken in
    descending order when ``reverse``; recorded on ``hw`` with ``n_pe`` PEs, replayed in
    windows of ``window`` rows and loop chunks of ``chunk`` ops."""

    programs: int
    g: int
    d: int
    dt: str
    iters: int = 1
    blocks: int = 0  # 0: one per tile
    skew: bool = False
    hw: str = "ahbm-v1"
    n_pe: int = 8
    window: int = BATCH_ROWS  # replay's window rows
    chunk: int = engine.FLUSH_CHECK_EVERY  # replay's loop chunk
    step: int = 0  # elements between blocks (overlapping when below a block; 0: a block)
    reverse: bool = False  # programs take blocks in descending order

    def n_blocks(self) -> int:
        return self.blocks or self.programs * self.iters

    def block(self, pid: int, j: int) -> int:
        b = (pid * self.iters + j) % self.n_blocks()
        return self.n_blocks() - 1 - b if self.reverse else b

    def at(self, b: int, size: int) -> int:
        """The element offset of block ``b`` of an input of blocks of ``size`` elements."""
        return b * (self.step or size)

    def extent(self, size: int) -> int:
        return self.at(self.n_blocks() - 1, size) + size


def pid_dtype(dt: str) -> str:
    """The dtype of ``x + float(pid)``."""
    return "float32" if dt == "int32" else dt


def check(plan: Plan, prog: list, regs: list[Reg], outs: list[int]) -> None:
    """Record ``prog`` as ``plan`` launches it, replay it batched and not, compare."""
    programs, g, d, dt, iters = plan[:5]
    tensors = {}
    for n, (name, shape, own) in enumerate(START):
        size = int(np.prod(shape(g, d)))
        rows = (plan.extent(size),) if own else shape(g, d)
        tensors[name] = kb.tensor(rows, dt, init=kb.randn(seed=n + 1))
    tensors["same"] = kb.tensor((g, d), dt, role="output")
    tensors["race"] = kb.tensor((g, d), pid_dtype(dt), role="output")
    for n, k in enumerate(outs):
        tensors[f"out{n}"] = kb.tensor((programs, iters, *regs[k].shape), regs[k].dtype,
                                       role="output")

    def kernel(*ptrs):
        pid = tl.program_id(0)
        same, race = ptrs[len(START):len(START) + 2]
        tl.store(same, tl.load(ptrs[1], (g, d), DTYPES[dt]))  # every program: one address
        if plan.skew and pid % 2:
            tl.exp(tl.load(ptrs[1], (g, d), DTYPES[dt]) * 0.5)
        for j in range(iters):
            with tl.scratch_scope():
                b = plan.block(pid, j)
                values = []
                for ptr, (_, shape, own) in zip(ptrs, START, strict=False):
                    s = shape(g, d)
                    at = plan.at(b, int(np.prod(s))) if own else 0
                    values.append(tl.load(ptr + at, s, DTYPES[dt]))
                values += [values[0] + float(pid), tl.trans(values[0]) * 2.0,
                           tl.reshape(tl.max(values[3], axis=0), ())]
                if j == 0:  # every program, its own values, at one address
                    tl.store(race, values[len(START)])
                run_program(prog, Tl(), values)
                for k, v in enumerate(values):
                    assert (v.shape, v.dtype.name) == (regs[k].shape, regs[k].dtype), (k, v)
                for ptr, k in zip(ptrs[len(START) + 2:], outs, strict=True):
                    size = int(np.prod(regs[k].shape))
                    tl.store(ptr + (pid * iters + j) * size, values[k])

    case = kb.Case("batching-property", kb.kernel(kernel), (programs,), tensors)
    inputs = case.inputs()
    want: dict[tuple[int, int], list[np.ndarray]] = {}
    for pid in range(programs):
        for j in range(iters):
            b = plan.block(pid, j)
            values = [block(inputs[name], plan.at(b, int(np.prod(shape(g, d)))), shape(g, d))
                      if own else inputs[name] for name, shape, own in START]
            values += [Numpy().binary("add", values[0], float(pid), pid_dtype(dt)),
                       Numpy().binary("mul", values[0].T, 2.0, pid_dtype(dt)),
                       values[3].max().reshape(())]
            with np.errstate(all="ignore"):
                run_program(prog, Numpy(), values)
            want[pid, j] = values
    with tempfile.TemporaryDirectory() as tmp:
        hw = HwConfig.from_dict({"base": plan.hw, "n_pe": plan.n_pe})
        path = kb.record(case, Path(tmp) / "p.ktrace", hw=hw).path
        off = _replay(path, False, plan.window, plan.chunk)
        on = _replay(path, True, plan.window, plan.chunk)
    assert off["verdict"]["status"] == "unverified", off["verdict"]  # clean, no reference
    arrays = on.pop("arrays")
    off.pop("arrays")
    assert on == off, prog
    np.testing.assert_array_equal(arrays["same"], inputs["y"])
    assert any(arrays["race"].tobytes() == want[pid, 0][len(START)].tobytes()
               for pid in range(programs))
    for n, k in enumerate(outs):
        for (pid, j), values in want.items():
            got = compare(arrays[f"out{n}"][pid, j], values[k], regs[k].dtype)
            assert got["ok"], (prog, pid, j, n, got)


def block(flat: np.ndarray, at: int, shape: tuple[int, ...]) -> np.ndarray:
    return flat[at:at + int(np.prod(shape))].reshape(shape)


def start_regs(g: int, d: int, dt: str) -> list[Reg]:
    return [*(Reg(shape(g, d), dt, 0) for _, shape, _ in START),
            Reg((g, d), pid_dtype(dt), 0), Reg((d, g), pid_dtype(dt), 0), Reg((), dt, 0)]


class Drawer0d(Drawer):
    """The differential test's drawer, with 0-d registers kept out of reductions and
    softmax (they have no axis)."""

    def _reduce(self):
        return self._with_axes(super()._reduce)

    def _softmax(self):
        return self._with_axes(super()._softmax)

    def _with_axes(self, draw: Any) -> Any:
        pick = self.pick
        self.pick = lambda pred=lambda r: True: pick(  # type: ignore[method-assign]
            lambda r: r.shape != () and pred(r))
        try:
            return draw()
        finally:
            del self.pick

    def rank(self) -> tuple | None:
        """A binary op of a 2-D register and one of fewer axes, either side (rare when
        drawn among all registers): broadcasting by rank."""
        a = self.pick(lambda r: len(r.shape) == 2 and r.dtype != "bool")
        ra = self.regs[a]
        b = self.pick(lambda r: len(r.shape) < 2 and r.dtype != "bool"
                      and broadcasts(ra.shape, r.shape))
        if b is None:
            return None
        op = self.draw(st.sampled_from(BINARY + COMPARE))
        dt = promote(DTYPES[ra.dtype], DTYPES[self.regs[b].dtype]).name
        dt = "bool" if op in COMPARE else ("float32" if op == "div" and dt == "int32" else dt)
        self.add(tuple(np.broadcast_shapes(ra.shape, self.regs[b].shape)), dt)
        pair = (("r", b), ("r", a)) if self.draw(st.booleans()) else (("r", a), ("r", b))
        return ("binary", op, *pair, dt)


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
    dt = data.draw(st.sampled_from((*FLOATS, "float16", "int32")), label="dtype")
    iters = data.draw(st.integers(1, 3), label="iters")
    blocks = data.draw(st.sampled_from([0, 0, 1, 2, programs * iters - 1]), label="blocks")
    plan = Plan(programs, g, d, dt, iters, blocks, data.draw(st.booleans(), label="skew"),
                data.draw(st.sampled_from(["ahbm-v1", "ahbm-v2"]), label="hw"),
                data.draw(st.sampled_from([8, 8, 3]), label="n_pe"),
                data.draw(st.sampled_from([BATCH_ROWS, 64, 9]), label="window"),
                data.draw(st.sampled_from([engine.FLUSH_CHECK_EVERY, 16, 5]), label="chunk"),
                data.draw(st.sampled_from([0, 0, 1, 3]), label="step"),
                data.draw(st.booleans(), label="reverse"))
    regs = start_regs(g, d, dt)
    drawer = Drawer0d(data, regs)
    prog = [ins for ins in (drawer.rank() for _ in range(data.draw(st.integers(1, 3))))
            if ins is not None]
    prog += drawer.steps(data.draw(st.integers(1, 8), label="steps"))
    outs = data.draw(st.lists(st.sampled_from(drawer.live()), min_size=1, max_size=3,
                              unique=True), label="outputs")
    check(plan, prog, regs, outs)


@pytest.mark.parametrize("programs, g, d, other", [(4, 4, 8, 3), (8, 4, 8, 6), (5, 3, 5, 6)])
def test_fewer_axes_with_as_many_programs_as_an_axis(programs: int, g: int, d: int,
                                                     other: int) -> None:
    """The shape of the bug ADR-0670 fixed, drawn on purpose: the ``(d,)`` row (``w``) or
    the 0-d maximum added to each program's ``(g, d)`` tile, with as many programs as
    ``g`` or ``d`` (``other`` names the register of fewer axes: 3 ``w``, 6 the 0-d one)."""
    regs = start_regs(g, d, "float32")
    prog = [("binary", "add", ("r", 0), ("r", other), "float32"),
            ("binary", "sub", ("r", other), ("r", 1), "float32")]
    regs += [Reg((g, d), "float32", 0), Reg((g, d), "float32", 0)]
    check(Plan(programs, g, d, "float32"), prog, regs, [len(regs) - 2, len(regs) - 1])
