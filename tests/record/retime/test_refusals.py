"""ADR-0900: where the op stream depends on the hardware, retime refuses in one line naming
the op, and writes nothing (not even the folder it was asked to write into)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kernbench as kb
from kernbench import tl
from kernbench.record.machine.context import current
from tests.record.retime.conftest import hw

GOLDEN = Path(__file__).resolve().parents[3] / "traces"


@kb.kernel
def lanes_tiled(x, y, *, n: int):
    tile = current().hw.math_lanes * 2  # the kernel reads its hardware to pick its tile
    for j in range(n // tile):
        a = tl.load(x + j * tile, (tile,), tl.float32)
        tl.store(y + j * tile, tl.exp(a))


@kb.kernel
def flag_race(x, flag, out, *, n: int, m: int):
    """Program 1 decides on a flag program 0 stores: which value it sees depends on time."""
    if tl.program_id(0) == 0:
        a = tl.load(x, (n,), tl.float32)
        for _ in range(4):
            a = tl.exp(a)
        tl.store(flag, tl.full((1,), 1, tl.int32))
    else:
        tl.load(x, (m,), tl.float32)  # a DMA-bound delay
        f = tl.load(flag, (1,), tl.int32)
        tl.store(out, tl.full((1,), 1.0 if f > 0 else 2.0, tl.float32))


def lanes_case() -> kb.Case:
    """A case whose kernel reads its hardware (a factory: sweeps build it by name)."""
    return kb.Case(name="lanes", kernel=lanes_tiled, grid=(1,),
                   tensors={"x": kb.tensor((1024,), "float32", init=kb.randn(seed=0)),
                            "y": kb.tensor((1024,), "float32", role="output")},
                   params={"n": 1024})


def _flag() -> kb.Case:
    return kb.Case(name="flag", kernel=flag_race, grid=(2,),
                   tensors={"x": kb.tensor((16384,), "float32", init=kb.randn(seed=0)),
                            "flag": kb.tensor((1,), "int32", init=kb.zeros(), role="inout"),
                            "out": kb.tensor((1,), "float32", role="output")},
                   params={"n": 4096, "m": 16384})


def _refused(trace: kb.Trace, new: kb.HwConfig, out: Path, match: str) -> None:
    with pytest.raises(kb.RetimeError, match=match):
        kb.retime(trace, new, out / "deeper" / "r.ktrace")
    assert not out.exists()  # nothing written, not even the folders asked for


def test_a_program_that_no_longer_fits_its_slot_after_a_tcm_change_is_refused(tmp_path,
                                                                             recorded):
    trace = recorded("gemm", hw("ahbm-v1"))
    small = hw("ahbm-v1", kernel_scratch_kib=64)
    with pytest.raises(kb.ScratchOverflowError):  # recording there fails too
        kb.record(kb.build_case("gemm", {"M": 128, "N": 256, "K": 128, "BM": 64}),
                  tmp_path / "g.ktrace", hw=small)
    _refused(trace, small, tmp_path / "out", r"no longer fits its TCM slot on ahbm-v1: "
             r".*scratch overflow: requested \d+ bytes")


def test_a_case_that_read_its_hardware_is_refused_naming_the_field_it_read(tmp_path):
    trace = kb.record(lanes_case(), tmp_path / "l.ktrace", hw="ahbm-v1")
    _refused(trace, hw("ahbm-v1", math_lanes=64), tmp_path / "out",
             r"test_refusals.py:\d+ \(program 0, op 0\): the case read hw.math_lanes "
             r"\(128; 64 on ahbm-v1\)")
    other = kb.retime(trace, hw("ahbm-v1", hbm_gbps=64), tmp_path / "fine.ktrace")
    assert other.t_end_ps > trace.t_end_ps  # a field it did not read: retimed


def test_a_guard_whose_value_depended_on_time_is_refused(tmp_path):
    trace = kb.record(_flag(), tmp_path / "f.ktrace", hw="ahbm-v1")
    slow = hw("ahbm-v1", hbm_gbps=16)  # program 1 now decides after program 0's store
    again = kb.record(_flag(), tmp_path / "again.ktrace", hw=slow)
    bits = [t.ops.filter(t.ops["name"] == "guard")["attrs"].to_list() for t in (trace, again)]
    assert bits == [['{"bits":0}'], ['{"bits":1}']]  # recording there takes the other path
    _refused(trace, slow, tmp_path / "out", r"test_refusals.py:\d+: the guard of program 1 "
             r"\(op \d+\) decided on a value that depends on time: recorded False, on "
             r"ahbm-v1 it is True")
    same = kb.retime(trace, hw("ahbm-v1", math_lanes=64), tmp_path / "same.ktrace")
    assert same.ops.filter(same.ops["name"] == "guard")["attrs"].to_list() == bits[0]


def test_a_trace_recorded_before_the_op_stream_is_refused(tmp_path):
    _refused(kb.Trace.open(GOLDEN / "gemm.ktrace"), hw("ahbm-v2"), tmp_path / "out",
             r"holds no op stream \(stream.parquet")


def test_ipcq_on_a_ring_of_another_size_is_refused(tmp_path, recorded):
    trace = recorded("ring-decode", hw("ahbm-v1"))
    _refused(trace, hw("ahbm-v1", n_pe=1), tmp_path / "out",
             r"the programs talk over a ring of 2 PEs, which is 1 on ahbm-v1")


def test_the_command_refuses_in_one_line_with_exit_2(tmp_path, recorded):
    trace = recorded("ring-decode", hw("ahbm-v1"))
    toml = tmp_path / "one.toml"
    toml.write_text('name = "one-pe"\nn_pe = 1\n')
    out = tmp_path / "out" / "r.ktrace"
    got = subprocess.run([sys.executable, "-m", "kernbench.cli", "retime", str(trace.path),
                          "--hw", str(toml), "-o", str(out)], capture_output=True, text=True)
    assert got.returncode == 2
    assert got.stderr.count("\n") == 1 and "RetimeError" in got.stderr, got.stderr
    assert "which is 1 on one-pe" in got.stderr and not out.parent.exists()
