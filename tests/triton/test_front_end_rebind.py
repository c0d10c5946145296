"""A real ``triton.JITFunction``'s Python function is rebuilt against kernbench's
``triton.language``: modules, ``tl.*``, ``math``/``libdevice`` functions, helpers and
``tl.constexpr`` globals are rebound by qualified name; source lines stay the user's."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl
from triton.language.extra import libdevice

import kernbench as kb
from kernbench import triton as kbt
from kernbench.triton import language as kbl
from kernbench.triton import libdevice as kb_libdevice
from kernbench.triton import tlmath
from kernbench.triton.jit import unwrap
from kernbench.triton.rebind import Rebinder

SCALE: tl.constexpr = tl.constexpr(3)
exp2 = tl.math.exp2


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def uses_everything(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = _twice(libdevice.tanh(x)) + tl.math.exp(x) + exp2(x) * SCALE
    tl.store(out_ptr + offs, y)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def heuristic_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs.to(tl.float32), mask=offs < n)


def test_real_jit_function_is_unwrapped_and_rebound() -> None:
    assert type(uses_everything).__module__ == "triton.runtime.jit"
    info = unwrap(uses_everything)
    fn = Rebinder().function(info.fn)
    g = fn.__globals__
    assert g["tl"] is kbl and g["libdevice"] is kb_libdevice and g["SCALE"] == 3
    assert g["exp2"] is tlmath.exp2 and g["triton"].__name__ == "kernbench.triton.standin"
    assert g["_twice"].__code__ is _twice.fn.__code__  # helpers rebuilt over their code
    assert fn.__code__.co_filename == __file__ and info.constexprs() == {"BLOCK"}


def test_rebound_kernel_records_and_matches_numpy(tmp_path) -> None:
    x = np.linspace(-1, 1, 32, dtype=np.float32)
    c = kbt.case(uses_everything, (1,), x, np.zeros_like(x), BLOCK=32)
    t = kb.record(c, out=tmp_path / "t.ktrace")
    got = kb.replay(t.path, in_process=True).outputs["out_ptr"]
    np.testing.assert_allclose(got, 2 * np.tanh(x) + np.exp(x) + np.exp2(x) * 3, rtol=1e-6)


def test_heuristics_fill_meta_parameters() -> None:
    c = kbt.case(heuristic_kernel, (1,), np.zeros(20, np.float32), 20)
    assert c.params["BLOCK"] == 32 and c.tensors["x_ptr"].role == "inout"


def test_closures_and_constexpr_cells_are_rebound() -> None:
    block = tl.constexpr(4)

    def body(x):
        return tl.arange(0, block) + x

    fn = Rebinder().function(body)
    assert fn.__closure__[0].cell_contents == 4 and fn.__globals__["tl"] is kbl
    assert fn(1).value.tolist() == [1, 2, 3, 4]


def test_a_helper_module_is_seen_rebound_and_other_modules_stay_themselves() -> None:
    from tests.triton.kernels import norm_lib, rms_norm

    g = Rebinder().function(unwrap(rms_norm.rms_norm_kernel).fn).__globals__
    view = g["norm_lib"]
    assert view is not norm_lib and view.__name__ == norm_lib.__name__
    assert view.EPS == norm_lib.EPS.value and view.inv_rms.__code__ is norm_lib.inv_rms.fn.__code__
    assert view.inv_rms.__globals__["mean_square"].__code__ is norm_lib.mean_square.fn.__code__
    assert g["np"] is np  # a module without kernels is not wrapped
