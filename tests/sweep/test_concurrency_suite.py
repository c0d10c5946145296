"""The milestone-concurrency suite (sweep/builtin.py): engine_issue x max_programs_per_pe over
decode, the causal prefill and a Triton kernel: its specs parse and their points cover the
grid."""

from __future__ import annotations

import itertools

import pytest

from kernbench.errors import BadInputError
from kernbench.sweep.builtin import SUITES, plan, resolve_spec
from kernbench.sweep.points import expand
from kernbench.sweep.spec import parse_spec

PARTS = SUITES["milestone-concurrency"]


def test_the_suite_covers_decode_prefill_and_a_triton_kernel(tmp_path):
    pairs = plan("milestone-concurrency", tmp_path / "C")
    assert [d.name for _, d in pairs] == ["concurrency-decode", "concurrency-prefill",
                                          "concurrency-triton"]
    assert [s.case for s, _ in pairs] == ["gqa-decode", "gqa-prefill",
                                          "kernbench.bench.triton_kernels:matmul_case"]


@pytest.mark.parametrize("name", PARTS)
def test_every_point_is_one_cell_of_engine_issue_x_programs_x_params(name):
    spec = resolve_spec(name)
    hw = dict(spec.hw)
    assert hw["engine_issue"] == ("blocking", "async") and 1 in hw["max_programs_per_pe"]
    points = list(expand(spec))
    axes = [v for _, v in spec.grid] + [hw["engine_issue"], hw["max_programs_per_pe"]]
    want = set(itertools.product(*axes))
    got = {(*dict(p.params).values(), p.hw_dict["engine_issue"], p.hw_dict["max_programs_per_pe"])
           for p in points}
    assert got == want and len(points) == len(want)


def test_engine_issue_is_a_text_hw_axis_and_takes_only_policy_names():
    base = {"case": "gemm", "hw": {"engine_issue": ["blocking", "overlapping"]}}
    with pytest.raises(BadInputError, match=r"hw.engine_issue values must be in .*'overlapping'"):
        parse_spec(base)
    with pytest.raises(BadInputError, match="hw.n_pe values must be numbers"):
        parse_spec({"case": "gemm", "hw": {"n_pe": ["eight"]}})
