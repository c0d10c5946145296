"""The reference, dtype-aware tolerances, and what verdict.json says."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from tests.replay.conftest import op, operand, write_trace

import kernbench as kb
from kernbench.errors import BadInputError
from kernbench.replay import replay
from kernbench.replay.verdict import TOLERANCES, compare, factory_spec, resolve_reference
from kernbench.schemas.ops import Op


@pytest.mark.parametrize(("dtype", "delta", "ok"), [
    ("float32", 1e-6, True), ("float32", 1e-3, False),
    ("bfloat16", 1e-2, True), ("bfloat16", 1e-1, False),
    ("int32", 1, False), ("int32", 0, True),
])
def test_tolerances_depend_on_the_dtype(dtype: str, delta: float, ok: bool) -> None:
    expected = np.array([1.0, 2.0, 4.0])
    got = compare((expected * (1 + delta)).astype(np.float64), expected, dtype)
    assert got["ok"] is ok
    assert (got["rtol"], got["atol"]) == (TOLERANCES[dtype].rtol, TOLERANCES[dtype].atol)


def test_errors_near_zero_are_judged_against_the_outputs_scale() -> None:
    expected = np.array([1000.0, 1e-6])
    assert compare(np.array([1000.0, 1e-3]), expected, "float32")["ok"]


def test_nan_matches_nan_but_not_a_number() -> None:
    e = np.array([np.nan, 1.0, np.inf])
    assert compare(e.copy(), e, "float32")["ok"]
    bad = compare(np.array([1.0, 1.0, np.inf]), e, "float32")
    assert not bad["ok"] and bad["max_abs_err"] == float("inf")
    assert bad["first_mismatch"]["index"] == [0]


def test_a_shape_difference_is_reported_not_raised() -> None:
    got = compare(np.zeros((2, 3)), np.zeros((3, 2)), "float32")
    assert not got["ok"] and "reference shape [3, 2] != output shape [2, 3]" in got["message"]


def test_bfloat16_outputs_compare_in_float64() -> None:
    e = np.array([1.0, 3.0], np.float32)
    assert compare(e.astype(ml_dtypes.bfloat16), e, "bfloat16")["max_abs_err"] == 0.0


def test_the_registry_is_looked_up_by_the_manifests_case_name() -> None:
    ref = resolve_reference({"case": "scale-exp", "case_params": {"rows": 1}}, None)
    assert ref.label == "registry:scale-exp" and ref.fn is not None


def test_a_case_not_built_in_has_no_reference() -> None:
    ref = resolve_reference({"case": "os:system", "case_params": None}, None)
    assert ref.fn is None and "not a built-in case" in ref.note


def test_a_named_factory_is_built_with_the_recorded_params() -> None:
    ref = resolve_reference({"case": "x", "case_params": {"rows": 1, "n": 8, "tile": 8}},
                            "kernbench.kernels.examples:scale_exp_case")
    assert ref.label == "kernbench.kernels.examples:scale_exp_case"
    assert ref.fn(x=np.zeros((1, 8), np.float32))["y"].shape == (1, 8)


def test_a_factory_that_fails_is_bad_input() -> None:
    def broken():
        raise RuntimeError("boom")

    with pytest.raises(BadInputError, match="building the case failed: RuntimeError: boom"):
        resolve_reference({"case": "x", "case_params": None}, broken)


def test_factory_spec_names_only_what_imports_back() -> None:
    from kernbench.kernels.examples import gemm_case

    assert factory_spec(gemm_case) == "kernbench.kernels.examples:gemm_case"
    assert factory_spec(lambda: None) is None


def _exp_trace(tmp_path: Path, x: np.ndarray) -> Path:
    ops = [op(Op.DMA_READ, 0, 10, [operand("hbm", 0, (4,))], operand("tcm", 0, (4,))),
           op(Op.LOG, 10, 20, [operand("tcm", 0, (4,))], operand("tcm", 16, (4,))),
           op(Op.EXP, 20, 30, [operand("tcm", 16, (4,))], operand("tcm", 32, (4,))),
           op(Op.DMA_WRITE, 30, 40, [operand("tcm", 32, (4,))], operand("hbm", 4096, (4,)))]
    return write_trace(tmp_path / "t.ktrace", ops,
                       {"x": (x, "input"), "y": (np.zeros(4, np.float32), "output")})


def _kernel() -> None:
    """Stands for the synthetic trace's kernel (recorded as ``synthetic:kernel``)."""


_kernel.__module__, _kernel.__qualname__ = "synthetic", "kernel"


def _synthetic_case(reference) -> kb.Case:
    """A case that rebuilds ``_exp_trace``'s recorded case, with the given reference."""
    def data():
        return kb.data(np.zeros(4, np.float32))

    return kb.Case("t", _kernel, (1,), {
        "x": kb.tensor((4,), "float32", init=data()),
        "y": kb.tensor((4,), "float32", role="output", init=data())}, reference=reference)


def test_without_a_reference_nothing_is_compared_and_the_replay_is_unverified(tmp_path: Path
                                                                            ) -> None:
    res = replay(_exp_trace(tmp_path, np.arange(1, 5, dtype=np.float32)), in_process=True)
    assert res.status == "unverified" and res.verdict["reference"] is None
    assert res.verdict["outputs"] == {"y": {"checked": False, "ok": True}}
    assert res.max_abs_err == {}


def test_the_first_op_that_made_a_non_finite_value_is_named(tmp_path: Path) -> None:
    x = np.array([1.0, -1.0, 2.0, 0.0], np.float32)

    def factory():
        return _synthetic_case(lambda x: {"y": x})

    res = replay(_exp_trace(tmp_path, x), case=factory, in_process=True)
    assert res.verdict["first_nonfinite"] == {"op_id": 1, "name": "log",
                                              "src": "synthetic.py:10"}
    assert res.status == "wrong" and res.verdict["outputs"]["y"]["mismatches"] == 1  # exp(log(-1))


def test_a_reference_that_raises_is_a_failed_verification(tmp_path: Path) -> None:
    def factory():
        return _synthetic_case(lambda x: 1 / 0)

    res = replay(_exp_trace(tmp_path, np.ones(4, np.float32)), case=factory, in_process=True)
    assert res.status == "failed"
    assert "the reference raised ZeroDivisionError" in res.verdict["error"]
    saved = json.loads((tmp_path / "t.ktrace" / "replay" / "verdict.json").read_text())
    assert saved["error"] == res.verdict["error"]


def test_a_reference_naming_an_unknown_output_is_an_error(tmp_path: Path) -> None:
    def factory():
        return _synthetic_case(lambda x: {"z": x})

    res = replay(_exp_trace(tmp_path, np.ones(4, np.float32)), case=factory, in_process=True)
    assert res.status == "failed" and "['z'], which are not output tensors" in res.verdict["error"]


def test_compare_in_chunks_gives_the_whole_array_answer(monkeypatch) -> None:
    """The flagship's 67M-element output is compared in bounded chunks; any chunk size
    gives the same errors, scale, mismatch count and first mismatch as one chunk."""
    import numpy as np

    from kernbench.replay import verdict

    rng = np.random.default_rng(3)
    expected = rng.standard_normal((64, 33)).astype(np.float32)
    expected[63, 32] = 9.0  # the output scale sits in the last chunk
    actual = expected.copy()
    actual[40, 7] += 0.25
    actual[50, 1] = np.nan
    whole = verdict.compare(actual, expected, "float32")
    monkeypatch.setattr(verdict, "_CHUNK", 5)
    chunked = verdict.compare(actual, expected, "float32")
    assert chunked == whole
    assert whole["mismatches"] == 2 and whole["atol_scale"] == 9.0
    assert whole["first_mismatch"]["index"] == [40, 7]


@pytest.mark.parametrize("dtype", ["int64", "uint32", "uint8", "int16"])
def test_integer_outputs_compare_exactly(dtype: str) -> None:
    """No tolerance, and int64 compared as integers: float64 cannot tell 2**62 + 1 from
    2**62."""
    info = np.iinfo(dtype)
    e = np.array([info.max - 1, info.min, 7], dtype)
    assert compare(e.copy(), e, dtype)["ok"] and TOLERANCES[dtype].rtol == 0
    off = e.copy()
    off[0] += 1
    got = compare(off, e, dtype)
    assert not got["ok"] and got["mismatches"] == 1
