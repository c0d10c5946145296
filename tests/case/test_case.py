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
        assert set(out) == {n for n, t in case.tensors.items() if t.role == "output"}
        for k, v in out.items():
            assert v.shape == case.tensors[k].shape


@pytest.mark.parametrize("tensor_dtype", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("layout", ["plain", "transposed", "float64", "stored"])
def test_storage_view_reads_the_bytes_make_gives_and_make_never_shares(tensor_dtype, layout):
    import ml_dtypes

    dt = dtypes.by_name(tensor_dtype)
    rng = np.random.default_rng(7)
    src = rng.standard_normal((6, 4)) * 100
    arr = {"plain": src.astype(dt.np if tensor_dtype != "bfloat16" else ml_dtypes.bfloat16),
           "transposed": src.T.copy().astype(dt.np).T,  # not C-contiguous
           "float64": src,
           "stored": None}[layout]
    if layout == "stored":  # as replay reads it back: the stored bits
        made = kb.data(src.astype(dt.np)).make_storage((6, 4), dt)
        init = init_from_json(kb.data(src).to_json(), made.tobytes(), shape=(6, 4), dtype=dt)
    else:
        init = kb.data(arr)
    expected = init.make_storage((6, 4), dt)
    view = init.storage_view((6, 4), dt)
    assert view.dtype == expected.dtype and view.tobytes() == expected.tobytes()
    before = np.array(init.array, copy=True)
    init.make_storage((6, 4), dt)[...] = 0  # make's array is the caller's own
    assert np.array_equal(np.asarray(init.array), before, equal_nan=True)
    out = np.zeros((6, 4), dt.storage)
    init.make_into(out, dt, zeroed=True)
    assert out.tobytes() == expected.tobytes()
