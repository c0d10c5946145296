"""Phase 2 recomputes every guard and compares it bit for bit (ADR-0840): a trace whose
input data were edited, or whose decision depended on a race, is never verified."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import kernbench as kb
from kernbench import tl
from kernbench.schemas.arrow import TENSORS
from kernbench.trace import file_sha256

HERE = Path(__file__).name


@kb.kernel
def loop_on_code(code, x, y, *, n: int):
    pid = tl.program_id(0)
    k = int(tl.load(code + pid, (1,), tl.int32))  # the decision replay must recompute
    acc = tl.load(x + pid * n, (n,), tl.float32)
    for _ in range(k):
        acc = acc * 2.0
    tl.store(y + pid * n, acc)


def loop_case() -> kb.Case:
    code = np.array([0, 2, 1, 3], np.int32)
    return kb.Case(name="loop-on-code", kernel=loop_on_code, grid=(4,),
                   tensors={"code": kb.tensor((4,), "int32", init=kb.data(code)),
                            "x": kb.tensor((4, 8), "float32", init=kb.randn(seed=5)),
                            "y": kb.tensor((4, 8), "float32", role="output")},
                   params={"n": 8},
                   reference=lambda code, x: {"y": x * 2.0 ** code[:, None]})


def edit_input(path: Path, name: str, values: np.ndarray) -> None:
    """Replace tensor ``name``'s stored contents and re-hash the manifest, so the edited
    trace opens as a consistent one: only its data no longer select the recorded path."""
    table = pq.read_table(path / "tensors.parquet")
    rows = table.to_pylist()
    for row in rows:
        if row["name"] == name:
            row["data"] = np.ascontiguousarray(values).tobytes()
    pq.write_table(pa.Table.from_pylist(rows, schema=TENSORS), path / "tensors.parquet")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["tensors.parquet"] = file_sha256(path / "tensors.parquet")
    (path / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))


def failure(res: kb.ReplayResult) -> str | None:
    """The message of the op replay stopped at (the verdict's ``invalid_read``)."""
    return (res.verdict.get("invalid_read") or {}).get("message")


def _line(text: str) -> int:
    lines = Path(__file__).read_text(encoding="utf-8").splitlines()
    return next(i for i, s in enumerate(lines, 1) if text in s and "_line(" not in s)


def test_an_edited_input_that_changes_one_guard_fails_replay_naming_the_guard(tmp_path):
    trace = kb.record(loop_case(), tmp_path / "t.ktrace")
    assert kb.replay(trace.path, case=loop_case, in_process=True).ok
    edit_input(trace.path, "code", np.array([0, 2, 1, 5], np.int32))
    res = kb.replay(trace.path, in_process=True)
    assert not res.ok
    want = (rf"^the trace's path diverges from its data at \S*{HERE}:"
            rf"{_line('k = int(tl.load(code')} \(program 3\): recorded 3, replay computes 5$")
    assert re.match(want, failure(res) or ""), res.verdict


def test_the_command_line_exits_1_and_never_says_verified(tmp_path):
    trace = kb.record(loop_case(), tmp_path / "t.ktrace")
    edit_input(trace.path, "code", np.array([1, 2, 1, 3], np.int32))
    proc = subprocess.run([sys.executable, "-m", "kernbench.replay", str(trace.path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "verified" not in proc.stdout.lower()
    assert "diverges from its data" in proc.stdout
    assert "(program 0): recorded 0, replay computes 1" in proc.stdout


def test_an_edit_that_keeps_every_decision_still_verifies_the_path(tmp_path):
    """Guards pin decisions, not data: other data along the same path replays (its outputs
    are then checked against the reference, as any trace's)."""
    trace = kb.record(loop_case(), tmp_path / "t.ktrace")
    edit_input(trace.path, "x", np.ones((4, 8), np.float32))
    res = kb.replay(trace.path, in_process=True)
    assert failure(res) is None and res.verdict["n_executed"] == res.verdict["n_ops"]


@kb.kernel
def flag_race(flag, out):
    """Program 1 decides on a flag program 0 sets: nothing orders them (a race)."""
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(flag, tl.full((1,), 1, tl.int32))
    else:
        if tl.load(flag, (1,), tl.int32) == 1:
            tl.store(out, tl.full((1,), 7, tl.int32))
        else:
            tl.store(out, tl.full((1,), 9, tl.int32))


def race_case() -> kb.Case:
    return kb.Case(name="flag-race", kernel=flag_race, grid=(2,),
                   tensors={"flag": kb.tensor((1,), "int32", role="inout", init=kb.zeros()),
                            "out": kb.tensor((1,), "int32", role="output")})


def test_a_decision_on_a_race_is_reported_by_check_and_its_path_held_by_the_guard(tmp_path):
    trace = kb.record(race_case(), tmp_path / "r.ktrace")
    report = kb.analyze.check(trace)
    assert report.exit_code == 1 and report.violated() == ["data_race"]
    text = report.to_text()
    assert "nothing orders them" in text and f"{HERE}:{_line('if tl.load(flag')}" in text
    guard = trace.ops.filter(trace.ops["name"].cast(str) == "guard").to_dicts()
    assert len(guard) == 1 and guard[0]["program"] == 1
    # the recording read the flag in recorded time order; replay computes the same order,
    # so it replays the path the recording took, and nothing else
    res = kb.replay(trace.path, in_process=True)
    assert failure(res) is None
    recorded = json.loads(guard[0]["attrs"])["bits"]
    assert int(res.outputs["out"][0]) == (7 if recorded == 1 else 9)
    # the other order (the flag stored only after the read) is a path the data did not take
    # in this trace: flip the recorded decision and replay refuses it
    def flip(rows: list[dict]) -> None:
        for r in rows:
            if r["name"] == "guard":
                r["attrs"] = json.dumps({"bits": 1 - recorded}, separators=(",", ":"))
    from tests.conftest import rewrite_ops

    rewrite_ops(trace.path, flip)
    res = kb.replay(trace.path, in_process=True)
    assert not res.ok and "diverges from its data" in (failure(res) or "")
    assert f"recorded {bool(1 - recorded)!r}" in (failure(res) or "")
