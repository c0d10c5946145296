"""The language features of issue 29 on Triton-syntax kernels: each recorded, replayed
verified against its numpy reference, and compared with Triton's own interpreter where the
interpreter runs it the compiler's way.

The interpreter runs in one child process for the module (torch never enters this process),
npz in, npz out, as ``test_differential`` does. Not compared with it: ``logic`` (the
interpreter evaluates Python's ``and`` / ``or`` / ``not`` on blocks with Python's semantics,
not the compiler's ``logical_and`` — its output differs from a compiled kernel's; the
reference is the compiler's rule). No kernel here does bf16 arithmetic (the interpreter is
wrong on it; it would be compared with numpy only).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.errors import KernelError
from kernbench.triton import dtypes as kbd
from tests.triton.kernels import combine, front

ROOT = Path(__file__).resolve().parents[2]
HERE = re.escape(f"{__name__.replace('.', '/')}.py")
INTERPRET = "from tests.triton.kernels.spec import interpret_main; interpret_main()"
#: (module, launch factory, compared with the interpreter)
ENTRIES = [("front", "warps_param_launch", True), ("front", "zero_d_launch", True),
           ("front", "logic_launch", False), ("combine", "reduce_launch", True),
           ("combine", "scan_launch", True), ("combine", "split_join_launch", True),
           ("combine", "histogram_launch", True), ("combine", "batched_dot_launch", True),
           ("combine", "sort_launch", True)]
IDS = [e[1].removesuffix("_launch") for e in ENTRIES]
MODULES = {"front": front, "combine": combine}


def _launch(module: str, factory: str):
    return getattr(MODULES[module], factory)()


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """(module, factory) -> ReplayResult, each launch recorded and replayed once, verified."""
    done = {}
    tmp = tmp_path_factory.mktemp("lang")

    def get(module: str, factory: str):
        if factory not in done:
            c = _launch(module, factory).case()
            t = kb.record(c, out=tmp / f"{factory}.ktrace")
            done[factory] = kb.replay(t.path, case=lambda **_: c)  # in this process
        return done[factory]

    return get


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory) -> dict[str, dict[str, np.ndarray]]:
    tmp = tmp_path_factory.mktemp("interp")
    jobs = []
    for module, factory, compare in ENTRIES:
        if compare:
            np.savez(tmp / f"{factory}-in.npz", **_launch(module, factory).arrays())
            jobs.append({"factory": f"tests.triton.kernels.{module}:{factory}", "params": {},
                         "inputs": str(tmp / f"{factory}-in.npz"),
                         "out": str(tmp / f"{factory}-out.npz")})
    (tmp / "request.json").write_text(json.dumps(jobs))
    path = os.pathsep.join([str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", INTERPRET, str(tmp / "request.json")],
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path},
                          cwd=tmp, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {f: dict(np.load(tmp / f"{f}-out.npz")) for _, f, c in ENTRIES if c}


@pytest.mark.parametrize(("module", "factory", "compare"), ENTRIES, ids=IDS)
def test_feature_kernel_replays_verified_against_numpy(replayed, module, factory,
                                                       compare) -> None:
    res = replayed(module, factory)
    assert res.verified, res.verdict
    for name, want in _launch(module, factory).expected().items():
        got = res.outputs[name].reshape(np.shape(want))
        exact = got.dtype.kind in "biu" or name in ("val_ptr", "j_ptr", "c_ptr", "out_ptr")
        if exact and factory not in ("zero_d_launch", "batched_dot_launch"):
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize(("module", "factory", "compare"), [e for e in ENTRIES if e[2]],
                         ids=[i for i, e in zip(IDS, ENTRIES, strict=True) if e[2]])
def test_feature_kernel_matches_triton_interpreter(replayed, interpreted, module, factory,
                                                   compare) -> None:
    res, oracle = replayed(module, factory), interpreted[factory]
    assert res.outputs and set(res.outputs) <= set(oracle), (sorted(res.outputs), sorted(oracle))
    for name, got in res.outputs.items():
        want = oracle[name]
        got = got.reshape(want.shape)
        assert got.dtype == want.dtype, name
        if got.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:  # float: the order of a reduction or a scan's tree differs from theirs
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


# -- the documented tree order --------------------------------------------------------------
@triton.jit
def _sum4(a, b):
    return a + b


@triton.jit
def tree_kernel(x_ptr, out_ptr, scan_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(out_ptr, tl.reduce(x, 0, _sum4))
    tl.store(scan_ptr + tl.arange(0, 4), tl.associative_scan(x, 0, _sum4))


def test_reduce_and_scan_follow_the_documented_pairwise_tree(tmp_path) -> None:
    """fp32 sums whose value depends on the order: adjacent pairs, then their sum (reduce);
    out[2] = s[0] + x[2], out[3] = s[1] (scan), as ADR-0560 documents."""
    x = np.array([1e8, 1, -1e8, 1], np.float32)
    c = kbt.case(tree_kernel, (1,), x, np.zeros(1, np.float32), np.zeros(4, np.float32))
    t = kb.record(c, out=tmp_path / "tree.ktrace")
    out = kb.replay(t.path, in_process=True).outputs
    f = np.float32
    pair = [f(x[0] + x[1]), f(x[2] + x[3])]
    assert out["out_ptr"][0] == f(pair[0] + pair[1]) == 0.0  # sequential order gives 1.0
    np.testing.assert_array_equal(out["scan_ptr"], [x[0], pair[0], f(pair[0] + x[2]),
                                                    f(pair[0] + pair[1])])


# -- dtype predicates and attributes, against triton.language's own dtypes --------------------
PREDICATES = ["is_int", "is_int_signed", "is_int_unsigned", "is_bool", "is_floating",
              "is_standard_floating", "is_ptr", "is_block", "is_fp8", "is_int1",
              "is_int8", "is_int16", "is_int32", "is_int64", "is_uint8", "is_uint16",
              "is_uint32", "is_uint64", "is_fp16", "is_bf16", "is_fp32", "is_fp64"]


@pytest.mark.parametrize("name", list(kbd.DTYPES))
def test_dtype_predicates_and_attributes_match_triton(name) -> None:
    ours, theirs = kbd.DTYPES[name], getattr(tl, name)
    assert {p: getattr(ours, p)() for p in PREDICATES} == {
        p: getattr(theirs, p)() for p in PREDICATES}
    assert (ours.primitive_bitwidth, ours.itemsize, ours.codegen_name()) == (
        theirs.primitive_bitwidth, theirs.itemsize, theirs.codegen_name())
    if theirs.is_int():
        assert (ours.get_int_max_value(), ours.get_int_min_value()) == (
            theirs.get_int_max_value(), theirs.get_int_min_value())
    if theirs.is_floating():
        assert (ours.exponent_bias, ours.fp_mantissa_width) == (
            theirs.exponent_bias, theirs.fp_mantissa_width)
    assert ours.value is ours  # DTYPE.value of a constexpr parameter holding a dtype


# -- triton.language.standard and libdevice -------------------------------------------------
from triton.language import inline_asm_elementwise  # noqa: E402 - refused only when called
from triton.language.extra import libdevice  # noqa: E402
from triton.language.standard import _is_power_of_two, _log2  # noqa: E402


@triton.jit
def standard_kernel(x_ptr, f_ptr, out_ptr, BLOCK: tl.constexpr):
    L: tl.constexpr = _log2(BLOCK)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    f = tl.load(f_ptr + offs)
    tl.store(out_ptr + 0, tl.standard.xor_sum(x, 0) + L + _is_power_of_two(BLOCK))
    tl.store(out_ptr + 1, tl.standard._log2(BLOCK * 4))
    v, i = tl.reduce((x, offs), 0, tl.standard._argmin_combine_tie_break_left)
    tl.store(out_ptr + 2, v * 1000 + i)
    g = libdevice.pow(f, 2.0) + libdevice.isnan(f) * 100 + libdevice.trunc(f * 3.0)
    g = libdevice.add_rn(g, libdevice.fmod(f, 2.0)) + libdevice.saturatef(f)
    tl.store(f_ptr + offs, g + libdevice.isinf(f) * 1000)


def test_standard_names_and_libdevice_functions(tmp_path) -> None:
    x = np.array([5, 3, 9, 3, 12, 7, 3, 1], np.int32)
    f = np.array([1.5, -2.25, np.nan, np.inf, -0.7, 0.0, 3.0, -1.0], np.float32)
    c = kbt.case(standard_kernel, (1,), x, f.copy(), np.zeros(3, np.int32), BLOCK=8)
    t = kb.record(c, out=tmp_path / "std.ktrace")
    out = kb.replay(t.path, in_process=True).outputs
    xor = np.bitwise_xor.reduce(x)
    np.testing.assert_array_equal(out["out_ptr"], [xor + 3 + 1, 5, 1 * 1000 + 7])
    with np.errstate(invalid="ignore"):
        want = (f ** 2 + np.isnan(f) * 100 + np.trunc(f * 3) + np.fmod(f, np.float32(2))
                + np.clip(f, 0, 1) + np.isinf(f) * 1000).astype(np.float32)
    np.testing.assert_array_equal(out["f_ptr"], want)


# -- refusals: a KernelError at the kernel's line ---------------------------------------------
@triton.jit
def and_on_int_data(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), x and x)


@triton.jit
def if_and_on_block(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if tl.program_id(0) == 0 and x > 0:  # a scalar decides (tests/triton/test_guards.py)
        tl.store(x_ptr, x)


@triton.jit
def not_on_int(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), not tl.arange(0, BLOCK))


@triton.jit
def gather_call(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.gather(x, x, 0))


@triton.jit
def missing_member(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + tl.arange(0, BLOCK)).frobnicate())


@triton.jit
def missing_dtype_attr(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, x_ptr.dtype.element_ty.to_ir(None))


@triton.jit
def missing_libdevice(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr, libdevice.j0(tl.load(x_ptr)))


@triton.jit
def imported_refused(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(x_ptr + tl.arange(0, BLOCK), inline_asm_elementwise("", "=r,r", [x], tl.int32,
                                                                 True, 1))


@pytest.mark.parametrize(("kernel", "match"), [
    (and_on_int_data, r"Python 'and' on a tl\.int32 value: Triton's compiler rejects it"),
    (if_and_on_block, r"the truth value of a \[8\] block is ambiguous"),
    (not_on_int, r"Python 'not' on a tl\.int32 value: Triton's compiler rejects it"),
    (gather_call, r"tl\.gather is not supported by kernbench: a gather of a block"),
    (missing_member, r"tl\.tensor\.frobnicate is not supported by kernbench: Triton's "
                     r"tl\.tensor has no attribute 'frobnicate' either"),
    (missing_dtype_attr, r"tl\.dtype\.to_ir is not supported by kernbench"),
    (missing_libdevice, r"libdevice\.j0 is not supported by kernbench"),
    (imported_refused, r"tl\.inline_asm_elementwise is not supported by kernbench: inline"),
], ids=["and-int-data", "if-and-block", "not-int", "gather", "tensor-attr", "dtype-attr",
        "libdevice", "imported-name"])
def test_refusal_is_a_kernel_error_at_the_kernel_line(tmp_path, kernel, match) -> None:
    c = kbt.case(kernel, (1,), np.zeros(8, np.int32), BLOCK=8, outputs=["x_ptr"])
    with pytest.raises(KernelError, match=rf"^{HERE}:\d+: .*{match}"):
        kb.record(c, out=tmp_path / "t.ktrace")


def test_and_or_rewrite_keeps_the_kernel_line_numbers(tmp_path) -> None:
    """The rewritten code is compiled on the kernel's own lines: errors and ops' src name the
    line of the ``and``."""
    import inspect

    lines, first = inspect.getsourcelines(and_on_int_data.fn)
    line = first + next(i for i, t in enumerate(lines) if " and " in t)
    c = kbt.case(and_on_int_data, (1,), np.zeros(8, np.int32), BLOCK=8, outputs=["x_ptr"])
    with pytest.raises(KernelError, match=rf"^{HERE}:{line}: "):
        kb.record(c, out=tmp_path / "t.ktrace")
    lines, first = inspect.getsourcelines(front.logic_kernel.fn)
    band = first + next(i for i, t in enumerate(lines) if "band = " in t)
    ops = kb.record(front.logic_launch().case(), out=tmp_path / "l.ktrace").ops
    assert f"tests/triton/kernels/front.py:{band}" in set(ops["src"].to_list())
