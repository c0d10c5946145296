"""Guards on the chip (record/machine/chip/guard.py, docs/adr/0843): a decision on data waits
for its operand, decides once every earlier op of the chip is decided, costs
``branch_cycles``, and is deterministic; forced onto ahbm-v2's fields the chip times every
guard kernel whose programs do not race for an atomic as ahbm-v2's closed form does."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.analyze.frames import operands
from kernbench.errors import RecordLimitError
from kernbench.record.machine.chip import launch
from kernbench.trace.hw import PRESETS
from tests.record.guards.test_bounds import forever_case
from tests.record.guards.test_decisions import classify_case
from tests.replay.test_guard_divergence import failure, race_case
from tests.triton.kernels import guards as triton_guards

V3 = PRESETS["ahbm-v3"]
N = 16


@kb.kernel
def gate(x, code, y, *, n: int):
    """``if code[pid] > 0`` doubles the row."""
    pid = tl.program_id(0)
    c = tl.load(code + pid, (1,), tl.int32)
    a = tl.load(x + pid * n, (n,), tl.float32)
    if c > 0:
        a = a * 2.0
    tl.store(y + pid * n, a)


def gate_case(codes: tuple[int, ...] = (3, -1, 0, 5, 2, -7, 1, 4, 9, -2, 6, 0)) -> kb.Case:
    code = np.array(codes, np.int32)
    p = len(code)

    def reference(x: np.ndarray, code: np.ndarray) -> dict[str, np.ndarray]:
        return {"y": np.where(code[:, None] > 0, x * 2.0, x).astype(np.float32)}

    return kb.Case(name="gate", kernel=gate, grid=(p,),
                   tensors={"x": kb.tensor((p, N), "float32", init=kb.randn(seed=3)),
                            "code": kb.tensor((p,), "int32", init=kb.data(code)),
                            "y": kb.tensor((p, N), "float32", role="output")},
                   params={"n": N}, reference=reference)


def _ops(trace: kb.Trace) -> pl.DataFrame:
    return trace.ops.with_columns(pl.col("name").cast(pl.String))


@pytest.mark.parametrize("branch_cycles", [0, 7])
def test_a_guard_starts_when_its_operand_lands_and_costs_branch_cycles(tmp_path,
                                                                       branch_cycles):
    hw = dataclasses.replace(V3, name="v3-branch", branch_cycles=branch_cycles)
    trace = kb.record(gate_case(), tmp_path / "g.ktrace", hw=hw)
    ops = _ops(trace)
    guards = ops.filter(pl.col("name") == "guard")
    assert guards.height == 12
    ins = (operands(ops).collect().filter(pl.col("role") == "in")
           .select("op_id", "mem_pe", "addr", "nbytes"))
    outs = (operands(ops).collect().filter(pl.col("role") == "out")
            .select("op_id", "mem_pe", "addr", "nbytes"))
    for g in guards.to_dicts():
        mine = ops.filter((pl.col("program") == g["program"]) & (pl.col("seq") < g["seq"]))
        where = ins.filter(pl.col("op_id") == g["op_id"]).row(0, named=True)
        # the operand's producer: the program's last earlier op writing the decided bytes
        producer = (mine.join(outs, on="op_id")
                    .filter((pl.col("mem_pe") == where["mem_pe"])
                            & (pl.col("addr") == where["addr"]))
                    .sort("seq").row(-1, named=True))
        assert producer["name"] == "gt"
        assert g["t_start_ps"] == producer["t_end_ps"] > producer["t_issue_ps"]
        assert g["t_issue_ps"] == g["t_start_ps"]
        assert g["busy_ps"] == branch_cycles * hw.cycle_ps
        assert g["t_end_ps"] == g["t_start_ps"] + branch_cycles * hw.cycle_ps
        # the kernel stalled from issuing the comparison to the operand's landing
        assert g["wait_ps"] == g["t_start_ps"] - producer["t_issue_ps"]
        later = ops.filter((pl.col("program") == g["program"]) & (pl.col("seq") > g["seq"]))
        assert later.height and later["t_issue_ps"].min() >= g["t_end_ps"]
        code = (3, -1, 0, 5, 2, -7, 1, 4, 9, -2, 6, 0)[g["program"]]
        assert json.loads(g["attrs"])["bits"] == int(code > 0)
    assert kb.replay(trace.path, case=gate_case, in_process=True).verified


#: guard kernels whose programs never race for an atomic (with atomics, which program takes
#: a lock or a ticket first is decided at equal times by op_id, which the chip numbers in
#: global issue order and the closed form PE by PE)
MATCHED = {"varlen": triton_guards.varlen_case, "paged": triton_guards.paged_case,
           "halve": triton_guards.halve_case, "cross-entropy": triton_guards.cross_entropy_case,
           "jsd": triton_guards.jsd_case, "classify": classify_case}
TIMING = ["pe", "program", "seq", "name", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps",
          "wait_ps", "scratch_cursor", "scope_depth", "src", "attrs"]


@pytest.mark.parametrize("name", sorted(MATCHED))
def test_the_chip_on_ahbm_v2_fields_times_a_guard_kernel_as_the_closed_form(name, tmp_path,
                                                                             monkeypatch):
    hw = dataclasses.replace(PRESETS["ahbm-v2"], name="v2-branch", branch_cycles=5)
    closed = kb.record(MATCHED[name](), tmp_path / "closed.ktrace", hw=hw)
    monkeypatch.setattr(launch, "ALWAYS", True)
    chip = kb.record(MATCHED[name](), tmp_path / "chip.ktrace", hw=hw)

    def rows(t: kb.Trace) -> pl.DataFrame:
        return (t.ops.sort("pe", "seq").select(TIMING)
                .with_columns(pl.col("name").cast(pl.String), pl.col("src").cast(pl.String)))

    a, b = rows(closed), rows(chip)
    assert a.filter(pl.col("name") == "guard").height >= 4
    assert a.equals(b)
    assert chip.manifest["t_end_ps"] == closed.manifest["t_end_ps"]


_CHILD = """
import sys
sys.path.insert(0, {root!r})
import kernbench as kb
from tests.triton.kernels.guards import locked_case
kb.record(locked_case(programs=6), {out!r}, hw="ahbm-v3")
"""


def test_a_spin_lock_across_pes_records_byte_identical_in_two_processes(tmp_path):
    """The lock's order across PEs is the chip's time order: the same in any process."""
    digests = set()
    for seed in ("0", "77"):
        out = str(tmp_path / f"t{seed}.ktrace")
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-c", _CHILD.format(root=os.getcwd(), out=out)],
                       check=True, env=env)
        ops = pl.read_parquet(os.path.join(out, "ops.parquet"))
        assert (ops["name"].cast(pl.String) == "guard").sum() > 6  # it spun
        digests.add(hashlib.sha256(open(os.path.join(out, "ops.parquet"), "rb").read())
                    .hexdigest())
    assert len(digests) == 1


def test_a_while_on_data_that_never_ends_stops_at_the_op_bound_on_the_chip(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("KERNBENCH_MAX_OPS", "400")
    with pytest.raises(RecordLimitError, match=r"test_bounds\.py:\d+: recording stopped: "
                       r"\d+ ops recorded at a decision on data .*KERNBENCH_MAX_OPS=400"):
        kb.record(forever_case(), tmp_path / "f.ktrace", hw="ahbm-v3")
    assert not (tmp_path / "f.ktrace").exists()


def test_a_decision_on_a_race_between_pes_takes_the_chips_order_and_check_reports_it(
        tmp_path):
    """Program 1 (PE 1) decides on a flag program 0 (PE 0) stores, unordered: the chip
    decides in its one time order (the store lands before the read starts here), check
    reports the race, and replay takes the recorded path."""
    trace = kb.record(race_case(), tmp_path / "r.ktrace", hw="ahbm-v3")
    report = kb.analyze.check(trace)
    assert report.violated() == ["data_race"]
    ops = _ops(trace)
    guard = ops.filter(pl.col("name") == "guard").row(0, named=True)
    store = ops.filter((pl.col("program") == 0) & (pl.col("name") == "dma_write")).row(
        0, named=True)
    read = ops.filter((pl.col("program") == 1) & (pl.col("name") == "dma_read")).row(
        0, named=True)
    landed = store["t_end_ps"] <= read["t_start_ps"]
    assert json.loads(guard["attrs"])["bits"] == int(landed)
    res = kb.replay(trace.path, in_process=True)
    assert failure(res) is None and res.verdict["n_executed"] == res.verdict["n_ops"]
    assert int(res.outputs["out"][0]) == (7 if landed else 9)
