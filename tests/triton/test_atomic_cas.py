"""``tl.atomic_cas`` (issue 29): several programs compare-and-swap into the same slots;
recorded, checked, replayed verified against a numpy simulation of the programs in the
trace's time order (Phase 2 applies atomics in ``(t_start_ps, op_id)`` order), with the old
values each program got back stored and compared too. The compare is bitwise; the trace's
``cmp`` attrs are validated like the other atomic fields."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import kernbench as kb
from kernbench.schemas.oracles import cas
from kernbench.testing import assert_check_ok
from kernbench.trace.attrs import problem
from tests.triton.kernels import atomic_claim


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return kb.record(atomic_claim.case(), out=tmp_path_factory.mktemp("cas") / "claim.ktrace")


def _orders(trace) -> tuple[list[int], list[int]]:
    """The programs of the slot claims (int32) and of the chain steps (float32), in the
    order replay applies them."""
    rows = trace.ops.filter(pl.col("name") == "atomic_cas").sort("t_start_ps", "op_id")
    dtype = rows["output"].struct.field("dtype")
    claims, chains = (rows.filter(dtype == dt)["program"].to_list()
                      for dt in ("int32", "float32"))
    return claims, chains


def test_atomic_cas_across_programs_replays_verified_against_numpy(recorded):
    assert_check_ok(recorded)
    claims, chains = _orders(recorded)
    every = list(range(atomic_claim.PROGRAMS))
    assert sorted(claims) == every and sorted(chains) == every
    res = kb.replay(recorded.path, case=lambda: atomic_claim.case(claims, chains),
                    in_process=True)
    assert res.verified, res.verdict
    want = atomic_claim.launch(claims, chains).expected()
    assert set(res.outputs) == set(want)
    for name, expected in want.items():
        np.testing.assert_array_equal(res.outputs[name], expected, err_msg=name)
    slots, got = res.outputs["slots_ptr"], res.outputs["got_ptr"].reshape(-1, 8)
    first = claims[0]  # the first program claims every free slot; the taken ones stay
    assert slots.tolist() == [first + 1, 7, first + 1, first + 1, 3, first + 1, first + 1,
                              first + 1]
    assert got[first].tolist() == [0, 7, 0, 0, 3, 0, 0, 0]


def test_the_trace_holds_scalar_and_tcm_compare_values(recorded):
    attrs = recorded.ops.filter(pl.col("name") == "atomic_cas")["attrs"].unique().to_list()
    assert any('"cmp":0' in a and '"value":' in a for a in attrs), attrs
    assert any('"cmp":"input"' in a and '"value"' not in a for a in attrs), attrs


def test_cas_compares_bits_not_values():
    old = np.array([0.0, -0.0, np.nan, 1.0], np.float32)
    got = cas(old, np.array([0.0, 0.0, np.nan, 1.0], np.float32), np.float32(5))
    assert got.tolist()[:2] == [5.0, -0.0] and got[2] == 5.0 and got[3] == 5.0
    assert cas(np.array([1, 2], np.int32), 2, 9).tolist() == [1, 9]


@pytest.mark.parametrize(("attrs", "n_inputs", "match"), [
    ('{"strides":[1],"value":1}', 1, "attrs lack 'cmp'"),
    ('{"strides":[1],"value":1,"cmp":"input"}', 1, "its attrs imply 2 inputs, it has 1"),
    ('{"strides":[1],"value":1,"cmp":"zero"}', 1, "attrs 'cmp' is \"zero\", expected a number"),
])
def test_the_validator_checks_the_compare_operand(attrs, n_inputs, match):
    assert match in (problem("atomic_cas", attrs, n_inputs) or "")


def test_the_other_atomics_need_no_compare():
    assert problem("atomic_add", '{"strides":[1],"value":1}', 1) is None
