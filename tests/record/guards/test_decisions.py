"""Decisions on data in kernels written against kernbench's own ``tl`` (ADR-0840): ``if``/
``elif``, ``while``, ``range`` bounds, early ``return``, ``bool()``/``int()``/``float()``
of a one-element handle. Each records the path its data select, as ``guard`` rows whose
bits are the numpy evaluation of the condition, and replays verified on every preset
(ahbm-v3: the chip-wide machine, ADR-0843)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import KernelError
from kernbench.schemas import guards

PRESETS = ["ahbm-v1", "ahbm-v2", "ahbm-v3"]  # v3: the chip-wide machine (ADR-0843)
N = 16


def guard_rows(trace: kb.Trace) -> list[dict]:
    ops = trace.ops
    return ops.filter(ops["name"].cast(str) == "guard").sort("op_id").to_dicts()


def bits(row: dict) -> int:
    return json.loads(row["attrs"])["bits"]


@kb.kernel
def classify(x, code, y, *, n: int):
    """if / elif / else on a loaded code, then a loop whose trip count is loaded data."""
    pid = tl.program_id(0)
    c = tl.load(code + pid, (1,), tl.int32)
    a = tl.load(x + pid * n, (n,), tl.float32)
    if c < 0:
        out = a * -1.0
    elif c == 0:
        out = a * 0.0
    else:
        out = a + 1.0
    for _ in range(int(c)):
        out = out * 2.0
    tl.store(y + pid * n, out)


def classify_case(codes: tuple[int, ...] = (-2, 0, 1, 3, -1, 2)) -> kb.Case:
    code = np.array(codes, np.int32)
    p = len(code)

    def reference(x: np.ndarray, code: np.ndarray) -> dict[str, np.ndarray]:
        c = code[:, None]
        out = np.where(c < 0, -x, np.where(c == 0, 0 * x, x + 1))
        return {"y": (out * 2.0 ** np.maximum(c, 0)).astype(np.float32)}

    return kb.Case(name="classify", kernel=classify, grid=(p,),
                   tensors={"x": kb.tensor((p, N), "float32", init=kb.randn(seed=1)),
                            "code": kb.tensor((p,), "int32", init=kb.data(code)),
                            "y": kb.tensor((p, N), "float32", role="output")},
                   params={"n": N}, reference=reference)


@pytest.mark.parametrize("hw", PRESETS)
def test_if_elif_and_a_loaded_loop_bound_take_the_data_path_and_replay_verified(tmp_path, hw):
    case = classify_case()
    trace = kb.record(case, tmp_path / "c.ktrace", hw=hw)
    assert str(trace.manifest["schema_version"]).endswith(".1")
    rows = guard_rows(trace)
    codes = np.array((-2, 0, 1, 3, -1, 2))
    # per program: c < 0, then c == 0 when not negative, then the loop bound int(c)
    want = []
    for p, c in enumerate(codes):
        want.append((p, "lt", int(c < 0)))
        if c >= 0:
            want.append((p, "eq", int(c == 0)))
        want.append((p, "int", int(c) & 0xFFFFFFFF))
    got = sorted((r["program"], bits(r)) for r in rows)
    assert got == sorted((p, b) for p, _, b in want)
    res = kb.replay(trace.path, case=classify_case, in_process=True)
    assert res.ok, res.verdict


@kb.kernel
def halve_until_small(x, y, steps):
    """``while`` on data: halve a loaded scalar until it is at most 1."""
    pid = tl.program_id(0)
    v = tl.load(x + pid, (1,), tl.float32)
    k = 0
    while v > 1.0:
        v = v * 0.5
        k += 1
    tl.store(y + pid, v)
    tl.store(steps + pid, tl.full((1,), k, tl.int32))


def halve_case() -> kb.Case:
    x = np.array([0.5, 3.0, 17.0, 1.0, 1000.0], np.float32)

    def reference(x: np.ndarray) -> dict[str, np.ndarray]:
        k = np.maximum(np.ceil(np.log2(np.maximum(x, 1.0))), 0).astype(np.int32)
        return {"y": (x / 2.0 ** k).astype(np.float32), "steps": k}

    return kb.Case(name="halve", kernel=halve_until_small, grid=(len(x),),
                   tensors={"x": kb.tensor((len(x),), "float32", init=kb.data(x)),
                            "y": kb.tensor((len(x),), "float32", role="output"),
                            "steps": kb.tensor((len(x),), "int32", role="output")},
                   reference=reference)


@pytest.mark.parametrize("hw", PRESETS)
def test_a_while_on_data_runs_as_many_iterations_as_the_data_take(tmp_path, hw):
    trace = kb.record(halve_case(), tmp_path / "w.ktrace", hw=hw)
    rows = guard_rows(trace)
    per_program = {p: [bits(r) for r in rows if r["program"] == p] for p in range(5)}
    steps = [0, 2, 5, 0, 10]  # halvings of 0.5, 3, 17, 1, 1000 to reach <= 1
    assert per_program == {p: [1] * k + [0] for p, k in enumerate(steps)}
    res = kb.replay(trace.path, case=halve_case, in_process=True)
    assert res.ok, res.verdict
    np.testing.assert_array_equal(res.outputs["steps"], steps)


@kb.kernel
def early_exit(flag, x, y, *, n: int):
    pid = tl.program_id(0)
    if tl.load(flag + pid, (1,), tl.int32) == 0:
        return  # nothing stored: y keeps its zeros
    s = float(tl.sum(tl.load(x + pid * n, (n,), tl.float32)))
    tl.store(y + pid * n, tl.full((n,), 1.0 if s > 0 else -1.0, tl.float32))


def early_case() -> kb.Case:
    flag = np.array([1, 0, 1, 1], np.int32)

    def reference(flag: np.ndarray, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        s = np.sign(x.sum(axis=1, dtype=np.float32))
        return {"y": (np.where(flag[:, None] == 0, 0.0, s[:, None])
                      * np.ones((4, N))).astype(np.float32)}

    return kb.Case(name="early", kernel=early_exit, grid=(4,),
                   tensors={"flag": kb.tensor((4,), "int32", init=kb.data(flag)),
                            "x": kb.tensor((4, N), "float32", init=kb.randn(seed=3)),
                            "y": kb.tensor((4, N), "float32", role="inout",
                                           init=kb.zeros())},
                   params={"n": N}, reference=reference)


@pytest.mark.parametrize("hw", PRESETS)
def test_an_early_return_and_a_float_of_a_reduction_decide_on_data(tmp_path, hw):
    trace = kb.record(early_case(), tmp_path / "e.ktrace", hw=hw)
    rows = guard_rows(trace)
    flag_line = f":{_line('if tl.load(flag')}"
    by_program = {r["program"]: r for r in rows if r["src"].endswith(flag_line)}
    assert [bits(by_program[p]) for p in range(4)] == [0, 1, 0, 0]
    sums = [r for r in rows if r["src"].endswith(f":{_line('s = float(')}")]
    assert sorted(r["program"] for r in sums) == [0, 2, 3]
    res = kb.replay(trace.path, case=early_case, in_process=True)
    assert res.ok, res.verdict
    for r in sums:
        want = np.float32(res.outputs["y"][r["program"], 0])
        assert np.sign(guards.value(bits(r), "float32")) == want


def _line(text: str) -> int:
    """The line of this file holding ``text`` (guard rows name the kernel's lines)."""
    lines = open(__file__, encoding="utf-8").read().splitlines()
    return next(i for i, s in enumerate(lines, 1) if text in s and "_line(" not in s)


def test_a_decision_on_a_block_of_two_elements_is_refused_at_its_line(tmp_path):
    @kb.kernel
    def block_if(x):
        if tl.load(x, (2,), tl.float32) > 0:
            pass

    case = kb.Case(name="b", kernel=block_if, grid=(1,),
                   tensors={"x": kb.tensor((2,), "float32")})
    with pytest.raises(KernelError, match=r"test_decisions\.py:\d+: .*needs one element"):
        kb.record(case, tmp_path / "b.ktrace")


@pytest.mark.parametrize("hw", PRESETS)
def test_a_decision_on_its_own_stored_data_reads_what_it_stored(tmp_path, hw):
    """A program stores, loads its store back and decides: the value graph applies the
    write (at its landing time) before the read."""
    @kb.kernel
    def store_then_decide(x, y):
        tl.store(y, tl.load(x, (1,), tl.int32) + 5)
        if tl.load(y, (1,), tl.int32) > 6:
            tl.store(y, tl.full((1,), 100, tl.int32))

    def case(v: int) -> kb.Case:
        return kb.Case(name="s", kernel=store_then_decide, grid=(1,),
                       tensors={"x": kb.tensor((1,), "int32",
                                               init=kb.data(np.array([v], np.int32))),
                                "y": kb.tensor((1,), "int32", role="output")},
                       reference=lambda x: {"y": np.where(x + 5 > 6, 100, x + 5)})
    for v, want in ((1, 0), (2, 1)):
        trace = kb.record(case(v), tmp_path / f"s{v}.ktrace", hw=hw)
        assert [bits(r) for r in guard_rows(trace)] == [want]
        assert kb.replay(trace.path, case=lambda v=v: case(v), in_process=True).ok


def test_branch_cycles_is_the_guard_s_cost_after_its_operand_is_visible(tmp_path):
    from kernbench.trace.hw import PRESETS as HW

    hw = HW["ahbm-v1"]
    slow = type(hw)(**{**hw.to_dict(), "branch_cycles": 7})
    a = guard_rows(kb.record(halve_case(), tmp_path / "a.ktrace", hw=hw))
    b = guard_rows(kb.record(halve_case(), tmp_path / "b.ktrace", hw=slow))
    assert len(a) == len(b) > 0
    assert all(r["t_end_ps"] == r["t_start_ps"] == r["t_issue_ps"] for r in a)
    assert all(r["t_end_ps"] - r["t_start_ps"] == r["busy_ps"] == 7 * hw.cycle_ps for r in b)
    assert all(r["engine"] == "none" and r["kind"] == "control" for r in a + b)


def test_branch_cycles_is_validated_like_every_hw_field():
    from kernbench.errors import BadInputError
    from kernbench.trace.hw import HwConfig

    assert HwConfig().branch_cycles == 0
    assert HwConfig.from_dict({"base": "ahbm-v2"}).branch_cycles == 0
    with pytest.raises(BadInputError, match="branch_cycles must be a non-negative number"):
        HwConfig(branch_cycles=-1)
