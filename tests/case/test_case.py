"""Cases, tensor inits and the built-in registry."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench as kb
from kernbench.case import init_from_json
from kernbench.kernels.registry import build_case, registry
from kernbench.schemas import dtypes


def test_randn_init_is_the_spec_formula():
    t = kb.tensor((3, 4), "bfloat16", init=kb.randn(seed=7, scale=0.5))
    got = t.init.make(t.shape, t.dtype)
    want = (np.random.default_rng(7).standard_normal((3, 4), dtype=np.float32) * 0.5)
    np.testing.assert_array_equal(got, want.astype(dtypes.bfloat16.np))


def test_inits_round_trip_through_json():
    for init in (kb.randn(3, 2.0), kb.zeros(), kb.arange()):
        back = init_from_json(init.to_json())
        a = init.make((5,), dtypes.float32)
        np.testing.assert_array_equal(back.make((5,), dtypes.float32), a)
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    back = init_from_json(kb.data(arr).to_json(), arr.tobytes(), shape=(2, 3),
                          dtype=dtypes.float32)
    np.testing.assert_array_equal(back.make((2, 3), dtypes.float32), arr)


def test_registry_holds_the_starter_cases():
    assert {"scale-exp", "gemm", "softmax", "small-ops"} <= set(registry())


def test_build_case_records_its_factory_params():
    case = build_case("scale-exp", {"tile": 256})
    assert case.case_params == {"rows": 2, "n": 4096, "tile": 256}
    assert case.params == {"n": 4096, "tile": 256}


@pytest.mark.parametrize("kw,needle", [
    (dict(shape=(0, 2), dtype="float32"), "non-positive"),
    (dict(shape=(2,), dtype="float64"), "unknown dtype 'float64'"),
    (dict(shape=(2,), dtype="float32", role="scratch"), "role 'scratch'"),
])
def test_bad_tensor_declarations_are_bad_input(kw, needle):
    with pytest.raises(kb.BadInputError, match=needle):
        kb.tensor(**kw)


def test_reference_of_builtin_cases_runs_on_their_inputs():
    for name in ("scale-exp", "gemm", "softmax"):
        case = build_case(name)
        inputs = {n: a for n, a in case.inputs().items() if case.tensors[n].role != "output"}
        out = case.reference(**inputs)
        for k, v in out.items():
            assert v.shape == case.tensors[k].shape
