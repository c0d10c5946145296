"""A PE's TCM port: one Server every engine of the PE shares."""

from __future__ import annotations

import dataclasses

from kernbench.record.machine.shared.tcm import TcmPort
from kernbench.trace.hw import PRESETS

V3 = PRESETS["ahbm-v3"]


def test_an_op_takes_at_least_its_tcm_bytes_at_the_port_rate():
    port = TcmPort(dataclasses.replace(V3, tcm_gbps=2048), pe=2)
    assert port.move(1_000, 4_096) == (3_000, 3_000)  # 4 KiB at 2 KiB/ns
    assert port.resource == "tcm.pe2"


def test_two_ops_streaming_at_once_take_their_bytes_at_the_rate_together():
    """A GEMM reading 96 KiB of operands and a MATH op reading and writing 96 KiB, both
    started at t = 0 on a 2048 GB/s port, end together no earlier than 192 KiB / 2048 GB/s:
    the pair takes max(compute, TCM bytes / tcm_gbps)."""
    port = TcmPort(dataclasses.replace(V3, tcm_gbps=2048))
    gemm_compute, math_compute = 40_000, 60_000  # ps
    gemm_tcm, _ = port.move(0, 96 * 1024)
    math_tcm, math_alone = port.move(0, 96 * 1024)
    pair = max(gemm_compute, gemm_tcm, math_compute, math_tcm)
    assert pair == 192 * 1024 * 1000 // 2048 == 96_000
    assert math_alone == 48_000 < math_tcm  # alone it would have ended at 48 ns


def test_an_unlimited_port_costs_nothing():
    port = TcmPort(PRESETS["ahbm-v2"])
    assert port.unlimited and port.move(5, 1 << 20) == (5, 5)
    assert TcmPort(V3).move(5, 0) == (5, 5)
