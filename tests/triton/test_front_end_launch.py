"""Launch binding of issue 29: kernel parameters named like launch options (Triton decides by
the signature), heuristics and autotune configs that set ``num_warps`` / ``num_stages``, 0-d
arrays as arguments and outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import triton

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import BadInputError
from tests.triton.kernels import front


def _verified(tmp_path, c: kb.Case, name: str) -> kb.ReplayResult:
    t = kb.record(c, out=tmp_path / f"{name}.ktrace")
    res = kb.replay(t.path, case=lambda **_: c)  # a lambda: replayed in this process
    assert res.verified, res.verdict
    return res


def test_kernel_parameter_named_num_warps_is_an_argument(tmp_path) -> None:
    launch = front.warps_param_launch()
    c = launch.case()
    assert c.params["num_warps"] == 8 and c.params["num_stages"] == 3  # the kernel's values
    res = _verified(tmp_path, c, "warps")
    np.testing.assert_array_equal(res.outputs["out_ptr"], launch.expected()["out_ptr"])
    manifest = json.loads((tmp_path / "warps.ktrace" / "manifest.json").read_text())
    assert manifest["params"]["num_warps"] == 8


def test_num_warps_keyword_of_case_goes_to_the_kernel_that_declares_it() -> None:
    x = np.ones(8, np.float32)
    c = kbt.case(front.warps_param_kernel, (1,), x, np.zeros_like(x), 8, num_warps=2,
                 num_stages=1, BLOCK=8)
    assert c.params["num_warps"] == 2 and c.params["num_stages"] == 1


def test_heuristic_that_sets_num_warps_is_a_launch_option(tmp_path) -> None:
    for n, warps in ((100, 8), (20, 2)):
        x = np.arange(n, dtype=np.float32)
        c = kbt.case(front.heuristic_warps_kernel, (1,), x, np.zeros_like(x), n,
                     reference=lambda x_ptr, **_: {"out_ptr": x_ptr + 1})
        assert c.params["num_warps"] == warps
        assert c.params["BLOCK"] == triton.next_power_of_2(n)
    _verified(tmp_path, c, "heur")


def test_autotune_config_sets_num_warps_and_num_stages() -> None:
    @triton.autotune(configs=[triton.Config({"BLOCK": 8}, num_warps=1, num_stages=5)],
                     key=["n"])
    @triton.jit
    def k(x_ptr, out_ptr, n, BLOCK: front.tl.constexpr):
        front.tl.store(out_ptr + front.tl.arange(0, BLOCK), 1.0)

    c = kbt.case(k, (1,), np.zeros(8, np.float32), np.zeros(8, np.float32), 8)
    assert (c.params["num_warps"], c.params["num_stages"], c.params["config"]) == (1, 5, 0)


def test_zero_d_arrays_are_arguments_and_outputs(tmp_path) -> None:
    launch = front.zero_d_launch()
    res = _verified(tmp_path, launch.case(), "zero-d")
    assert res.outputs["total_ptr"].size == 1
    np.testing.assert_allclose(res.outputs["total_ptr"].reshape(()),
                               launch.expected()["total_ptr"], rtol=1e-6)


def test_capture_writes_a_zero_d_output_back(tmp_path) -> None:
    launch = front.zero_d_launch(n=10)
    x, scale, total, n = (np.array(a) for a in launch.args)
    with kbt.capture(tmp_path / "cap"):
        front.zero_d_kernel[(1,)](x, scale, total, int(n), BLOCK=64)
    assert total.shape == ()
    np.testing.assert_allclose(total, np.sum(x * scale), rtol=1e-6)


def test_capture_passes_num_warps_to_the_kernel_that_declares_it(tmp_path) -> None:
    x, out = np.arange(40, dtype=np.float32), np.zeros(40, np.float32)
    with kbt.capture(tmp_path / "cap") as cap:
        front.warps_param_kernel[(1,)](x, out, 40, num_warps=2, num_stages=5, BLOCK=64)
    np.testing.assert_array_equal(out, x * 2 + 5)
    manifest = json.loads((cap.traces[0] / "manifest.json").read_text())
    assert (manifest["params"]["num_warps"], manifest["params"]["num_stages"]) == (2, 5)


@pytest.mark.parametrize("warps", ["two", float("nan"), float("inf"), [4]])
def test_a_launch_option_that_is_no_int_is_one_line_of_bad_input(warps: object) -> None:
    x = np.ones(8, np.float32)
    with pytest.raises(BadInputError, match=r"num_warps=.* is not an int"):
        kbt.case(front.logic_kernel, (1,), x, np.zeros_like(x), 8, FLAG=True, BLOCK=8,
                 num_warps=warps)
