"""ADR-0930: a workload model is a sweep case. Each point is one ``kb.Workload`` run in its
own folder; the points that differ only in hardware retime their launches from the first
one's run; the points table holds the workload's answer; resume, report, check, sql and
diff work over it; bad input is refused up front (tiny Llama shapes: seconds a point)."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench.cli import main
from kernbench.sweep import load_spec_file, resolve_spec, run_sweep
from tests.workload.test_workload import TINY

from .conftest import points_without_walls

#: the tiny layer's shape, and its batch x hardware axes
SHAPE = [f"{k}={v}" for k, v in TINY.items() if k != "batch"]
AXES = ["phase=decode", "batch=1,2", "hw.preset=ahbm-v2,ahbm-v3"]


def _p(items: list[str]) -> list[str]:
    return sum((["-p", i] for i in items), [])


def _folder(root, point_id):
    return root / "points" / f"{point_id}.workload"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The tiny decode layer at batch 1 and 2 on ahbm-v2 and ahbm-v3 (four points)."""
    root = tmp_path_factory.mktemp("wsweep") / "S"
    summary = run_sweep(resolve_spec("llama3-70b", [*AXES, *SHAPE]), root, workers=2)
    assert (summary.ok, summary.failed, summary.retimed) == (4, 0, 2)
    return root


def test_a_batch_by_hardware_sweep_records_one_point_per_batch_and_retimes_the_rest(swept):
    table = points_without_walls(swept)
    assert table["batch"].to_list() == [1, 1, 2, 2]
    assert table["hw.preset"].to_list() == ["ahbm-v2", "ahbm-v3"] * 2
    for batch in (1, 2):
        first, other = table.filter(pl.col("batch") == batch).iter_rows(named=True)
        assert first["retimed_from"] is None and first["launches_retimed"] == 0
        assert other["retimed_from"] == first["point_id"]
        # the reductions follow the topology (ring on v2, direct on v3): recorded
        assert other["launches_retimed"] > 0 and other["launches_recorded"] >= 1
        manifests = sorted(_folder(swept, other["point_id"]).glob("*.ktrace/manifest.json"))
        origins = [json.loads(m.read_text()).get("retimed_from") for m in manifests]
        assert sum(o is not None for o in origins) == other["launches_retimed"]
        assert {o["trace"].split("/")[1] for o in origins if o} == {
            f"{first['point_id']}.workload"}


def test_each_retimed_point_answers_the_bytes_of_running_its_workload_directly(swept,
                                                                               tmp_path):
    table = points_without_walls(swept).filter(pl.col("retimed_from").is_not_null())
    assert table.height == 2
    for row in table.iter_rows(named=True):
        direct = tmp_path / row["point_id"]
        kb.Workload("llama3-70b", "decode", hw=row["hw.preset"],
                    **{**TINY, "batch": row["batch"]}).run(direct, verify=False)
        assert (_folder(swept, row["point_id"]) / "workload.json").read_bytes() == (
            direct / "workload.json").read_bytes()


def test_the_points_table_holds_each_points_workload_answer(swept):
    table = points_without_walls(swept)
    assert table.height == 4
    for row in table.iter_rows(named=True):
        folder = _folder(swept, row["point_id"])
        body = json.loads((folder / "workload.json").read_text())
        assert (row["layer_s"], row["token_s"], row["tokens_per_s"]) == (
            body["layer_s"], body["token_s"], body["tokens_per_s"])
        assert row["floor_layer_s"] == body["floor_layer_s"] and "ttft_s" not in row
        layer = [r for r in body["rows"] if r["scope"] == "layer"]
        assert row["latency_ps"] == sum(r["latency_ps"] for r in layer)
        assert row["binding_kernel"] == max(layer, key=lambda r: r["latency_ps"])["name"]
        assert row["verified"] is False and row["replay_ok"] is None  # no replay stage
        launches = {r["trace"] for r in body["rows"]}
        assert launches == {p.name for p in folder.glob("*.ktrace")}
        assert row["launches_retimed"] + row["launches_recorded"] == len(launches)


def test_a_workload_sweep_resumes_keeping_finished_points_and_redoing_lost_ones(swept,
                                                                               tmp_path):
    root = tmp_path / "S"
    shutil.copytree(swept, root)
    before = points_without_walls(root)
    source, damaged = before["point_id"][0], before["point_id"][3]
    shutil.rmtree(_folder(root, source))  # a recorded point lost
    ops = sorted(_folder(root, damaged).glob("*.ktrace/ops.parquet"))[0]
    ops.write_bytes(ops.read_bytes()[:-9] + b"x" * 9)  # a retimed point's trace damaged
    again = run_sweep(resolve_spec("llama3-70b", [*AXES, *SHAPE]), root, workers=2)
    assert (again.resumed, again.ok, again.retimed) == (2, 4, 2)
    assert points_without_walls(root).equals(before)


def test_a_toml_spec_runs_the_workload_verified_on_each_preset(tmp_path, swept):
    shape = "\n".join(f"{k} = {v}" for k, v in TINY.items() if k != "batch")
    (tmp_path / "llama.toml").write_text(
        f'case = "llama3-70b"\n[grid]\nphase = "decode"\nbatch = 1\n{shape}\n'
        '[hw]\npreset = ["ahbm-v1", "ahbm-v3"]\n[stages]\nreplay = true\n')
    spec = load_spec_file(tmp_path / "llama.toml")
    summary = run_sweep(spec, tmp_path / "T", workers=2)
    assert (summary.ok, summary.retimed, summary.exit_code) == (2, 1, 0)
    table = points_without_walls(tmp_path / "T")
    assert table["verified"].to_list() == [True, True] == table["replay_ok"].to_list()
    assert table["check_ok"].to_list() == [True, True]
    # v3 at batch 1 retimed from v1 here and from v2 in the -p sweep: the same answer
    res = CliRunner().invoke(main, ["diff", str(swept), str(tmp_path / "T"),
                                    "--fail-on", "latency=+0%"])
    assert res.exit_code == 0, res.output
    assert "1 common points" in res.output and "ok->ok" in res.output


def test_report_check_and_sql_read_a_workload_sweep(swept, tmp_path):
    runner = CliRunner()
    ran = runner.invoke(main, ["sweep", "llama3-70b", *_p([*AXES, *SHAPE]), "-o", str(swept)])
    assert ran.exit_code == 0 and "4 points (4 ok, 0 failed, 4 resumed, 2 retimed)" in ran.output
    report = runner.invoke(main, ["report", str(swept), "--sort", "tokens_per_s"])
    assert report.exit_code == 0, report.output
    lines = report.output.splitlines()
    assert "(case llama3-70b): 4 points, 0 failed; sorted by tokens_per_s (highest first)" \
        in lines[0]
    for column in ("layer_s", "token_s", "tokens_per_s", "binding_kernel", "launches_retimed"):
        assert column in lines[2]
    best = points_without_walls(swept).sort("tokens_per_s", descending=True)["point_id"][0]
    assert lines[4].startswith(best)
    check = runner.invoke(main, ["check", str(swept)])
    assert check.exit_code == 0 and "4 points, ok" in check.output
    sql = runner.invoke(main, ["sql", str(swept), "--json", "SELECT point_id, COUNT(DISTINCT "
                               "launch) AS n FROM ops GROUP BY point_id ORDER BY point_id"])
    assert sql.exit_code == 0, sql.output
    counts = {r["point_id"]: r["n"] for r in json.loads(sql.output)}
    table = points_without_walls(swept)
    assert counts == dict(zip(table["point_id"], table["launches"], strict=True))


@pytest.mark.parametrize("args, message", [
    (["-p", "bacth=1,2"], "workload 'llama3-70b' has no parameter(s) ['bacth']; did you "
                          "mean 'batch'?"),
    (["-p", "phase=decode,train"], "workload phase 'train' is not one of"),
    (["-p", "heads=12"], "divisible by 8"),
    (["-p", "context=long"], "context expects int, got 'long'"),
])
def test_bad_workload_sweep_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args,
                                                                        message):
    res = CliRunner().invoke(main, ["sweep", "llama3-70b", *args, "-o", str(tmp_path / "S")])
    assert res.exit_code == 2, res.output
    assert message in res.output and len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "S").exists()
