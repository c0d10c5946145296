"""``python -m kernbench.replay`` and ``kb.replay``: exit codes, one-line bad input, the child
process, and never touching the recorded files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.replay.conftest import op, operand, restamp, write_trace

import kernbench as kb
from kernbench.errors import BadInputError, TraceFormatError
from kernbench.replay import ReplayResult, replay
from kernbench.schemas.ops import Op
from kernbench.trace import file_sha256


def run_main(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "kernbench.replay", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def hashes(path: Path) -> dict[str, str]:
    return {n: file_sha256(path / n) for n in ("ops.parquet", "tensors.parquet")
            if (path / n).exists()}


def test_a_correct_trace_exits_0_with_a_verified_line(copy_of) -> None:
    path = copy_of("scale-exp")
    proc = run_main(str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("verified: ") and "registry:scale-exp" in proc.stdout
    assert {p.name for p in (path / "replay").iterdir()} == {
        "values.parquet", "outputs.parquet", "verdict.json"}


WRONG_CASE = """
import dataclasses
from kernbench.kernels.examples import scale_exp_case


def wrong_case(rows=2, n=4096, tile=512):
    case = scale_exp_case(rows=rows, n=n, tile=tile)
    return dataclasses.replace(case, reference=lambda x: {"y": x * 0.0 + 1.0})
"""


def test_wrong_outputs_exit_1(copy_of, tmp_path: Path) -> None:
    (tmp_path / "wrongref.py").write_text(WRONG_CASE)
    path = copy_of("scale-exp")
    proc = run_main(str(path), "--case", "wrongref:wrong_case", "--case-path", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("WRONG: ") and "wrongref:wrong_case" in proc.stdout


def _truncate_ops(path: Path) -> None:
    data = (path / "ops.parquet").read_bytes()
    (path / "ops.parquet").write_bytes(data[: len(data) // 2])
    restamp(path)


def _remove_tensors(path: Path) -> None:
    (path / "tensors.parquet").unlink()


def _stale_hash(path: Path) -> None:
    data = bytearray((path / "ops.parquet").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "ops.parquet").write_bytes(bytes(data))


def _unknown_version(path: Path) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))


def _random_tensors(path: Path) -> None:
    (path / "tensors.parquet").write_bytes(os.urandom(4096))
    restamp(path)


BAD_INPUTS: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated ops.parquet": (_truncate_ops, r"ops\.parquet"),
    "missing tensors.parquet": (_remove_tensors, r"tensors\.parquet: missing"),
    "hash mismatch": (_stale_hash, r"sha256 does not match"),
    "unknown schema version": (_unknown_version, r"schema_version 99 is not supported"),
    "random bytes in tensors.parquet": (_random_tensors, r"tensors\.parquet"),
}


@pytest.mark.parametrize("what", list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_line_and_leaves_the_files_alone(copy_of,
                                                                     what: str) -> None:
    path = copy_of("scale-exp")
    corrupt, pattern = BAD_INPUTS[what]
    corrupt(path)
    before = hashes(path)
    proc = run_main(str(path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("kernbench replay: TraceFormatError: ")
    assert re.search(pattern, lines[0])
    assert proc.stdout == ""
    assert hashes(path) == before
    assert not (path / "replay").exists()


def test_a_missing_directory_exits_2(tmp_path: Path) -> None:
    proc = run_main(str(tmp_path / "nope.ktrace"))
    assert proc.returncode == 2 and "not a trace directory" in proc.stderr


@pytest.mark.parametrize(("spec", "message"), [
    ("nocolon", r"is not MODULE:FUNC"),
    ("no_such_module_xyz:f", r"cannot import 'no_such_module_xyz'"),
    ("kernbench.kernels.examples:nope", r"has no 'nope'"),
])
def test_a_bad_case_spec_exits_2(recorded, spec: str, message: str) -> None:
    proc = run_main(str(recorded("scale-exp")), "--case", spec)
    assert proc.returncode == 2
    assert re.search(r"BadInputError: .*" + message, proc.stderr)


def test_replay_never_modifies_the_recorded_files(copy_of) -> None:
    path = copy_of("gemm")
    before = hashes(path)
    replay(path)
    replay(path, in_process=True)
    assert hashes(path) == before


def test_kb_replay_runs_a_child_process_and_reads_its_result(copy_of) -> None:
    path = copy_of("gemm")
    res = replay(path)
    assert isinstance(res, ReplayResult) and res.verified
    assert res.outputs["c"].shape == (2, 2, 32, 32)
    assert res.max_abs_err["c"] < 1e-3
    assert res.verdict == json.loads((path / "replay" / "verdict.json").read_text())


def test_kb_replay_raises_the_childs_bad_input_error(copy_of) -> None:
    path = copy_of("gemm")
    _stale_hash(path)
    with pytest.raises(TraceFormatError, match="sha256 does not match"):
        replay(path)
    with pytest.raises(BadInputError, match="is not MODULE:FUNC"):
        replay(copy_of("scale-exp"), case="nocolon")


def test_an_importable_factory_is_passed_to_the_child_by_name(copy_of) -> None:
    from kernbench.kernels.examples import scale_exp_case

    res = replay(copy_of("scale-exp"), case=scale_exp_case)
    assert res.verified and res.verdict["reference"] == "kernbench.kernels.examples:scale_exp_case"


def test_a_local_factory_falls_back_to_in_process(copy_of) -> None:
    from kernbench.kernels.examples import scale_exp_case

    def factory(**params):
        return scale_exp_case(**params)

    res = replay(copy_of("scale-exp"), case=factory)
    assert res.verified and res.verdict["reference"].endswith("factory")


def test_replaying_again_replaces_the_replay_directory(copy_of) -> None:
    path = copy_of("scale-exp")
    replay(path, in_process=True)
    (path / "replay" / "stale").write_text("x")
    replay(path, in_process=True)
    assert not (path / "replay" / "stale").exists()
    assert not [p for p in path.iterdir() if p.name.startswith(".replay")]


def test_replay_is_exported_from_the_package() -> None:
    assert kb.replay is replay and kb.ReplayResult is ReplayResult


def test_an_op_name_this_kernbench_does_not_know_is_bad_input(tmp_path: Path) -> None:
    row = op(Op.EXP, 0, 10, [operand("tcm", 0, (4,))], operand("tcm", 16, (4,)))
    row["name"] = "frobnicate"
    path = write_trace(tmp_path / "u.ktrace", [row],
                       {"x": (np.ones(4, np.float32), "input")})
    proc = run_main(str(path))
    assert proc.returncode == 2
    assert "unknown op name(s) ['frobnicate']" in proc.stderr


def test_an_empty_op_log_replays(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "e.ktrace", [], {"x": (np.ones(4, np.float32), "input"),
                                                    "y": (np.zeros(4, np.float32), "output")})
    res = replay(path)
    assert res.status == "unverified" and res.verdict["n_ops"] == 0  # no reference
    np.testing.assert_array_equal(res.outputs["y"], np.zeros(4, np.float32))
