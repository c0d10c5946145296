"""Resident programs: program 0's scratch peak decides k, each program owns a
slot of kernel_scratch / k, an overflowing later program names its slot, k is in the
manifest."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.trace.hw import PRESETS

V2 = PRESETS["ahbm-v2"]
KIB = 1024


@kb.kernel
def grows(x, y, *, base: int, extra: int):
    """Program p holds ``base`` KiB of scratch, plus ``extra`` KiB in the last program."""
    p = tl.program_id(0)
    n = (base + (extra if p == tl.num_programs(0) - 1 else 0)) * KIB // 4
    tl.load(x, (n,), tl.float32)
    tl.store(y + p * 4, tl.load(x, (4,), tl.float32))


def _case(base: int, extra: int = 0, programs: int = 24) -> kb.Case:
    return kb.Case(name="grows", kernel=grows, grid=(programs,),
                   tensors={"x": kb.tensor((512 * KIB // 4,), "float32"),
                            "y": kb.tensor((programs * 4,), "float32", init=kb.zeros())},
                   params={"base": base, "extra": extra})


def test_a_300_kib_peak_gives_three_resident_programs_in_1_mib(tmp_path) -> None:
    trace = kb.record(_case(300), tmp_path / "k3.ktrace", hw=V2)
    assert trace.manifest["programs_per_pe"] == 1024 // 300 == 3
    ops = trace.ops
    slot = (1024 * KIB // 3) // 16 * 16
    # each program's scratch lies in one slot; PE 0 runs programs 0, 8, 16 at once
    loads = ops.filter(pl.col("name") == "dma_read").select(
        "program", "t_start_ps", addr=pl.col("output").struct.field("addr"))
    first = loads.group_by("program").agg(pl.col("addr").min()).sort("program")
    assert {a // slot for a in first["addr"]} == {0, 1, 2}
    pe0 = ops.filter(pl.col("pe") == 0).group_by("program").agg(
        pl.col("t_issue_ps").min().alias("t0"), pl.col("t_end_ps").max().alias("t1"))
    t = {r["program"]: (r["t0"], r["t1"]) for r in pe0.to_dicts()}
    assert t[0][0] == t[8][0] == t[16][0] == 0  # three resident at once
    assert t[0][1] > 0 and t[8][0] < t[0][1]


def test_the_cap_bounds_k_and_blocking_issue_keeps_one_program(tmp_path) -> None:
    capped = dataclasses.replace(V2, max_programs_per_pe=2)
    assert kb.record(_case(300), tmp_path / "c.ktrace",
                     hw=capped).manifest["programs_per_pe"] == 2
    assert kb.record(_case(300), tmp_path / "v1.ktrace",
                     hw="ahbm-v1").manifest["programs_per_pe"] == 1


def test_a_later_program_overflowing_its_slot_names_the_slot_and_k(tmp_path) -> None:
    with pytest.raises(kb.ScratchOverflowError, match=r"slot size 349520 bytes, k = 3 "):
        kb.record(_case(300, extra=100), tmp_path / "o.ktrace", hw=V2)
