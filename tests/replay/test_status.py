"""What a replay says happened (ADR-0830): ``ReplayResult.status`` is ``verified`` only when
a reference compared every output and each matched; a clean replay that compared nothing (no
reference, a reference returning ``{}``) or only some outputs is ``unverified``, and ``ok``
is ``verified``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.replay.conftest import op, operand, write_trace

import kernbench as kb
from kernbench.replay import replay
from kernbench.replay.result import EXIT_OK, EXIT_WRONG, ReplayResult, exit_code, summary
from kernbench.schemas.ops import Op
from kernbench.schemas.replay_status import STATUSES, verdict_status

X = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def _kernel() -> None:
    """Stands for the synthetic trace's kernel (recorded as ``synthetic:kernel``)."""


_kernel.__module__, _kernel.__qualname__ = "synthetic", "kernel"


def _two_outputs(tmp_path: Path) -> Path:
    """x is loaded once and written to both outputs: y == z == x."""
    ops = [op(Op.DMA_READ, 0, 10, [operand("hbm", 0, (4,))], operand("tcm", 0, (4,))),
           op(Op.DMA_WRITE, 10, 20, [operand("tcm", 0, (4,))], operand("hbm", 4096, (4,))),
           op(Op.DMA_WRITE, 20, 30, [operand("tcm", 0, (4,))], operand("hbm", 8192, (4,)))]
    zeros = np.zeros(4, np.float32)
    return write_trace(tmp_path / "t.ktrace", ops, {"x": (X, "input"), "y": (zeros, "output"),
                                                    "z": (zeros, "output")})


def _replay(tmp_path: Path, reference) -> ReplayResult:
    def factory() -> kb.Case:
        def data():
            return kb.data(np.zeros(4, np.float32))

        return kb.Case("t", _kernel, (1,), {
            "x": kb.tensor((4,), "float32", init=data()),
            "y": kb.tensor((4,), "float32", role="output", init=data()),
            "z": kb.tensor((4,), "float32", role="output", init=data())}, reference=reference)

    return replay(_two_outputs(tmp_path), case=factory, in_process=True)


def _saved(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "t.ktrace" / "replay" / "verdict.json").read_text())


def test_a_reference_that_compares_every_output_is_verified_and_ok(tmp_path: Path) -> None:
    res = _replay(tmp_path, lambda x: {"y": x, "z": x})
    assert (res.status, res.verified, res.ok) == ("verified", True, True)
    assert (_saved(tmp_path)["status"], _saved(tmp_path)["ok"]) == ("verified", True)
    assert summary(res).startswith("verified: 3/3 ops against ")
    assert exit_code(res) == exit_code(res, require_reference=True) == EXIT_OK


def test_a_reference_that_returns_nothing_is_unverified_and_not_ok(tmp_path: Path) -> None:
    res = _replay(tmp_path, lambda x: {})
    assert res.verdict["reference"] is not None and res.verdict["error"] is None
    assert (res.status, res.verified, res.ok) == ("unverified", False, False)
    assert (_saved(tmp_path)["status"], _saved(tmp_path)["ok"]) == ("unverified", False)
    line = summary(res)
    assert line.startswith("replayed 3/3 ops, no invalid reads; not verified: the reference")
    assert line.endswith("compared no output and not y, z")
    assert exit_code(res) == EXIT_OK and exit_code(res, require_reference=True) == EXIT_WRONG


def test_a_reference_that_leaves_out_an_output_is_unverified_and_names_it(tmp_path: Path
                                                                          ) -> None:
    res = _replay(tmp_path, lambda x: {"y": x})
    assert (res.status, res.ok) == ("unverified", False)
    assert res.verdict["outputs"]["y"]["checked"] and not res.verdict["outputs"]["z"]["checked"]
    assert summary(res).endswith("compared y max_abs_err=0 and not z")
    assert exit_code(res, require_reference=True) == EXIT_WRONG


def test_a_compared_output_that_differs_is_wrong_even_when_another_was_not_compared(
        tmp_path: Path) -> None:
    res = _replay(tmp_path, lambda x: {"y": x + 1})
    assert (res.status, res.ok) == ("wrong", False)
    assert summary(res).startswith("WRONG: 3/3 ops against ")
    assert exit_code(res) == EXIT_WRONG


def test_without_a_reference_a_clean_replay_is_unverified_and_not_ok(tmp_path: Path) -> None:
    res = replay(_two_outputs(tmp_path), in_process=True)
    assert res.verdict["reference"] is None and res.verdict["invalid_read"] is None
    assert (res.status, res.verified, res.ok) == ("unverified", False, False)
    assert summary(res).startswith("replayed 3/3 ops, no invalid reads; not verified: ")
    assert exit_code(res) == EXIT_OK and exit_code(res, require_reference=True) == EXIT_WRONG


@pytest.mark.parametrize(("verdict", "status"), [
    ({"reference": "r", "outputs": {"y": {"checked": True, "ok": True}}}, "verified"),
    ({"reference": "r", "outputs": {"y": {"checked": True, "ok": True},
                                    "z": {"checked": False, "ok": True}}}, "unverified"),
    ({"reference": "r", "outputs": {}}, "unverified"),  # a trace without outputs
    ({"reference": None, "outputs": {"y": {"checked": False, "ok": True}}}, "unverified"),
    ({"reference": "r", "outputs": {"y": {"checked": True, "ok": False}}}, "wrong"),
    ({"reference": "r", "outputs": {}, "error": "the reference raised"}, "failed"),
    ({"reference": None, "outputs": {}, "invalid_read": {"message": "m"}}, "failed"),
])
def test_the_status_is_derived_from_the_verdict_as_written_before_it_had_one(
        verdict: dict, status: str) -> None:
    """A verdict.json written before ``status`` existed (``ok`` was True when nothing was
    compared) reads as what it is."""
    old = {"ok": status != "wrong" and status != "failed", **verdict}
    assert verdict_status(old) == status and status in STATUSES
    res = ReplayResult({}, {}, old)
    assert res.status == status and res.ok is res.verified is (status == "verified")
