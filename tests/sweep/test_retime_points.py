"""ADR-0900: a sweep whose points differ only in hardware records each kernel point once and
retimes it for the others; the points table says which were retimed; it resumes as ever."""

from __future__ import annotations

import shutil

import polars as pl

import kernbench as kb
from kernbench.sweep import resolve_spec, run_sweep
from kernbench.sweep.task import run_point
from kernbench.trace.hw import HwConfig
from tests.record.retime.test_refusals import lanes_case

from .conftest import points_without_walls

SPEC = ["M=128", "N=128,256", "K=256", "hw.preset=ahbm-v1,ahbm-v3", "hw.hbm_gbps=64,128"]


def test_each_kernel_point_records_once_and_the_others_are_retimed_as_recorded(tmp_path):
    spec = resolve_spec("gemm", SPEC, check=True)
    summary = run_sweep(spec, tmp_path / "S", workers=2)
    assert (summary.ok, summary.failed) == (8, 0)
    table = points_without_walls(tmp_path / "S")
    firsts = table.group_by("N", maintain_order=True).first()["point_id"].to_list()
    retimed = dict(zip(table["point_id"], table["retimed_from"], strict=True))
    assert [retimed[p] for p in firsts] == [None, None]  # the first of each kernel records
    by_n = dict(zip(table["N"], table["point_id"], strict=True))  # ... the last per N
    for row in table.iter_rows(named=True):
        if row["point_id"] not in firsts:
            assert row["retimed_from"] == table.filter(pl.col("N") == row["N"])["point_id"][0]
        hw = HwConfig(**{**kb.load_hw(row["hw.preset"]).to_dict(),
                         "hbm_gbps": row["hw.hbm_gbps"]})
        fresh = kb.record(kb.build_case("gemm", {"M": 128, "N": row["N"], "K": 256}),
                          tmp_path / f"{row['point_id']}.ktrace", hw=hw)
        point = tmp_path / "S" / "points" / f"{row['point_id']}.ktrace"
        assert (point / "ops.parquet").read_bytes() == (fresh.path / "ops.parquet").read_bytes()
        assert row["latency_ps"] == fresh.t_end_ps and row["check_ok"]
    assert len(by_n) == 2


def test_a_retimed_sweep_resumes_and_records_a_lost_kernel_point_again(tmp_path):
    spec = resolve_spec("gemm", SPEC)
    run_sweep(spec, tmp_path / "S", workers=1)
    before = points_without_walls(tmp_path / "S")
    source = before["point_id"][0]
    shutil.rmtree(tmp_path / "S" / "points" / f"{source}.ktrace")
    again = run_sweep(spec, tmp_path / "S", workers=1)
    assert (again.resumed, again.ok) == (7, 8)
    assert points_without_walls(tmp_path / "S").equals(before)


def test_a_point_whose_stream_depends_on_its_hardware_is_recorded_not_retimed(tmp_path):
    """A case that reads its hardware's ``math_lanes``: its points on other lanes are
    recorded (retime refuses), on other fields retimed."""
    case = "tests.record.retime.test_refusals:lanes_case"
    source = kb.record(lanes_case(), tmp_path / "src.ktrace", hw="ahbm-v1")
    v1 = kb.load_hw("ahbm-v1").to_dict()
    task = {"point_id": "p", "case": case, "params": {}, "hw": {**v1, "math_lanes": 64},
            "replay": False, "check": False, "rules_text": None, "dest": str(tmp_path),
            "source": str(source.path), "source_id": "src", "source_name": "points/src.ktrace"}
    got = run_point(task)["row"]
    assert got["status"] == "ok" and got["retimed_from"] is None  # recorded there instead
    assert got["metrics"]["latency_ps"] != source.t_end_ps
    other = run_point({**task, "point_id": "q", "hw": {**v1, "hbm_gbps": 64}})["row"]
    assert other["status"] == "ok" and other["retimed_from"] == "src"
