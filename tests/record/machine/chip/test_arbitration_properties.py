"""Properties of the chip's engine arbitration over random mixes of resident programs
(hypothesis; docs/hardware-model.md): within a program each engine's ops start in issue
order; an engine is never idle while some program's head op on it is ready (work
conservation, under either policy); replays are verified; the op log is byte-identical in
another process."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import subprocess
import sys

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernbench as kb
from kernbench import tl
from kernbench.record.machine.chip import loop
from kernbench.trace.hw import PRESETS

N = 512  # elements per tile


@kb.kernel
def mix(x, y, *, seed: int, ops: int):
    """A random chain per program: loads, MATH ops on what it holds, copies into a
    persistent accumulator, a store; the mix depends on the program."""
    pid = tl.program_id(0)
    rng = random.Random(seed * 7919 + pid)
    acc = tl.zeros((N,), tl.float32)
    for j in range(ops):
        with tl.scratch_scope():
            a = tl.load(x + ((pid * ops + j) % 64) * N, (N,), tl.float32)
            for _ in range(3):  # the same scratch in every program: random ops, not counts
                k = rng.randrange(4)
                a = a + acc if k == 0 else a * 0.5 if k == 1 else (
                    tl.exp(a * 0.01) if k == 2 else tl.maximum(a, acc))
            tl.copy_to(acc, acc * 0.5 + a)
    tl.store(y + pid * N, acc)


def _reference(seed: int, ops: int, programs: int):
    def ref(x):
        x = x.reshape(64, N)
        out = np.zeros((programs, N), np.float32)
        for pid in range(programs):
            rng = random.Random(seed * 7919 + pid)
            acc = np.zeros(N, np.float32)
            for j in range(ops):
                a = x[(pid * ops + j) % 64].copy()
                for _ in range(3):
                    k = rng.randrange(4)
                    a = a + acc if k == 0 else a * np.float32(0.5) if k == 1 else (
                        np.exp(a * np.float32(0.01)) if k == 2 else np.maximum(a, acc))
                acc = acc * np.float32(0.5) + a
            out[pid] = acc
        return {"y": out.ravel()}
    return ref


def mix_case(seed: int = 0, ops: int = 4, programs: int = 8) -> kb.Case:
    return kb.Case(name="mix", kernel=mix, grid=(programs,),
                   tensors={"x": kb.tensor((64 * N,), "float32", init=kb.randn(seed=seed)),
                            "y": kb.tensor((programs * N,), "float32", role="output")},
                   params={"seed": seed, "ops": ops},
                   reference=_reference(seed, ops, programs))


def _busy_covers(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> bool:
    """Whether the engine's busy intervals (sorted by start) cover ``[lo, hi)``."""
    t = lo
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if s > t:
            return False
        if e > t:
            t = e
        if t >= hi:
            return True
    return t >= hi


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
          max_examples=min(settings().max_examples, 12))
@given(seed=st.integers(0, 10_000), ops=st.integers(1, 5), programs=st.integers(1, 40),
       k=st.sampled_from([1, 2, 4, 8, 32]), policy=st.sampled_from(["in_order", "ready_first"]),
       n_pe=st.sampled_from([1, 2, 4]))
def test_each_program_is_served_in_order_and_no_engine_idles_while_a_head_op_is_ready(
        tmp_path_factory, seed, ops, programs, k, policy, n_pe):
    hw = dataclasses.replace(PRESETS["ahbm-v3"], name="mix", engine_arbitration=policy,
                             max_programs_per_pe=k, n_pe=n_pe)
    ready: dict[int, int] = {}
    loop.OBSERVE = lambda node: ready.__setitem__(node.op_id, node.ready)
    try:
        path = tmp_path_factory.mktemp("mix") / "mix.ktrace"
        trace = kb.record(mix_case(seed, ops, programs), path, hw=hw)
    finally:
        loop.OBSERVE = None
    ops_ = (trace.ops.filter(pl.col("engine").cast(pl.String) != "none")
            .with_columns(pl.col("engine").cast(pl.String))
            .select("op_id", "pe", "program", "seq", "engine", "t_issue_ps", "t_start_ps",
                    "busy_ps"))
    # (the occupancy dry run numbers its ops from 0 too: the recording's own come later)
    assert len(ops_) > 0 and set(ops_["op_id"].to_list()) <= set(ready)
    ops_ = ops_.with_columns(pl.col("op_id").replace_strict(ready, default=None).alias("ready"))
    for (_, engine), g in ops_.group_by(["pe", "engine"]):
        g = g.sort("t_start_ps", "op_id")
        starts, ends = g["t_start_ps"].to_numpy(), (g["t_start_ps"] + g["busy_ps"]).to_numpy()
        assert (starts[1:] >= ends[:-1]).all()  # capacity 1
        if engine == "link_tx":
            continue
        # each program's ops on this engine start in its issue order; an op is the head of
        # its queue from the start of the op before it (in_order: the one before it of any
        # program), and from then until it starts, once ready, the engine is never idle
        by = "program" if policy == "ready_first" else None
        for _, mine in (g.group_by(by) if by else [(None, g)]):
            mine = mine.sort("seq")
            s = mine["t_start_ps"].to_numpy()
            assert (np.diff(s) >= 0).all(), mine
            head = np.maximum(mine["t_issue_ps"].to_numpy(), np.concatenate([[0], s[:-1]]))
            lo = np.maximum(head, mine["ready"].to_numpy())
            for a, b in zip(lo.tolist(), s.tolist(), strict=True):
                if b > a:
                    assert _busy_covers(starts, ends, a, b), (engine, a, b)
    res = kb.replay(trace.path, case=lambda **_: mix_case(seed, ops, programs),
                    in_process=True)
    assert res.ok, res.verdict


_CHILD = """
import sys, dataclasses
sys.path.insert(0, {root!r})
import kernbench as kb
from kernbench.trace.hw import PRESETS
from tests.record.machine.chip.test_arbitration_properties import mix_case
hw = dataclasses.replace(PRESETS["ahbm-v3"], name="mix", max_programs_per_pe=8, n_pe=2)
kb.record(mix_case(3, 3, 24), {out!r}, hw=hw)
"""


def test_the_op_log_is_byte_identical_in_processes_with_other_hash_seeds(tmp_path):
    root = os.getcwd()
    digests = set()
    for seed in ("0", "1", "4242"):
        out = str(tmp_path / f"t{seed}.ktrace")
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-c", _CHILD.format(root=root, out=out)], check=True,
                       env=env)
        for f in ("ops.parquet", "shared.parquet"):
            p = os.path.join(out, f)
            if os.path.exists(p):
                digests.add((f, hashlib.sha256(open(p, "rb").read()).hexdigest()))
    assert len(digests) in (1, 2) and len({f for f, _ in digests}) == len(digests)
