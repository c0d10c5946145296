"""Error hints: what a kernel author sees when a call does not fit, and how to fix it."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench import tl
from kernbench.cli import main
from kernbench.errors import closest
from kernbench.record import hints

THIS = "test_hints.py"


def _case(kernel, tensors, **params):
    return kb.Case(name="h", kernel=kernel, grid=(1,), tensors=tensors, params=params)


def test_scratch_overflow_lists_the_live_allocations_by_line_and_size(tmp_path):
    @kb.kernel
    def hog(x, *, n: int, tile: int):
        acc = tl.zeros((tile,), tl.float32)  # 4 KiB, held all along
        for j in range(n // tile):
            a = tl.load(x + j * tile, (tile,), tl.float32)  # 4 KiB per iteration, never freed
            acc = acc + a  # 4 KiB per iteration, never freed

    tensors = {"x": kb.tensor((1 << 20,), "float32")}
    with pytest.raises(kb.ScratchOverflowError) as info:
        kb.record(_case(hog, tensors, n=1 << 20, tile=1024), tmp_path / "t.ktrace")
    msg = str(info.value)
    assert "\n" not in msg  # the CLI shows one line: the hint must be on it
    assert re.search(r"requested 4096 bytes at cursor \d+ with budget 1048576 bytes", msg)
    sites = re.findall(rf"{THIS}:(\d+): ([\d.]+) KiB in (\d+) buffers?", msg)
    assert len(sites) == 3
    by_line = {int(line): (float(kib), int(n)) for line, kib, n in sites}
    load_line, add_line, zeros_line = sorted(by_line, key=lambda ln: -by_line[ln][0])
    assert by_line[zeros_line] == (4.0, 1)
    n_load = by_line[load_line][1]
    assert by_line[load_line] == (4.0 * n_load, n_load)
    assert by_line[load_line][0] + by_line[add_line][0] + 4.0 + 4.0 > 1024  # it is all there
    assert "scratch_scope" in msg


def test_scratch_overflow_forgets_what_a_scope_freed(tmp_path):
    @kb.kernel
    def scoped(x, *, n: int, tile: int):
        for j in range(n // tile):
            with tl.scratch_scope():
                a = tl.load(x + j * tile, (tile,), tl.float32)
                tl.exp(a)
        tl.zeros((300_000,), tl.float32)  # 1.2 MB: too big even with everything freed

    with pytest.raises(kb.ScratchOverflowError) as info:
        kb.record(_case(scoped, {"x": kb.tensor((8192,), "float32")}, n=8192, tile=1024),
                  tmp_path / "t.ktrace")
    msg = str(info.value)
    assert "at cursor 0 " in msg and "live allocations" not in msg


def test_live_list_drops_rewound_allocations():
    class B:
        def __init__(self, addr):
            self.addr = addr

    live = [B(0), B(16), B(64), B(128)]
    hints.drop_from(live, 64)
    assert [b.addr for b in live] == [0, 16]
    hints.drop_from(live, 1000)
    assert [b.addr for b in live] == [0, 16]
    hints.drop_from(live, 0)
    assert live == []


@pytest.mark.parametrize("a,b,want", [
    ((16, 64), (32, 64), "tl.dot(a, tl.trans(b)) ([16, 64] @ [64, 32])"),
    ((64, 16), (64, 32), "tl.dot(tl.trans(a), b) ([16, 64] @ [64, 32])"),
    ((16, 8), (32, 16), "tl.dot(b, a)"),
])
def test_dot_shape_error_suggests_the_transpose_that_fits(tmp_path, a, b, want):
    @kb.kernel
    def bad_dot(x, y, *, a0: int, a1: int, b0: int, b1: int):
        p = tl.load(x, (a0, a1), tl.float32)
        q = tl.load(y, (b0, b1), tl.float32)
        tl.dot(p, q)

    tensors = {"x": kb.tensor((4096,), "float32"), "y": kb.tensor((4096,), "float32")}
    with pytest.raises(kb.KernelError, match=re.escape(want)) as info:
        kb.record(_case(bad_dot, tensors, a0=a[0], a1=a[1], b0=b[0], b1=b[1]),
                  tmp_path / "t.ktrace")
    assert f"{THIS}:" in str(info.value) and "do not fit" in str(info.value)


def test_dot_shape_error_without_a_fitting_transpose_has_no_suggestion():
    assert hints.dot_shapes((3, 5), (7, 11)) == ""


def test_triton_pointer_plus_arange_explains_pointer_shape_loads(tmp_path):
    @kb.kernel
    def triton_style(x, y, *, n: int):
        offs = tl.arange(0, n)
        v = tl.load(x + offs, (n,), tl.float32)
        tl.store(y, v)

    tensors = {"x": kb.tensor((64,), "float32"), "y": kb.tensor((64,), "float32",
                                                               role="output")}
    with pytest.raises(kb.KernelError, match=r"\(pointer, shape\)") as info:
        kb.record(_case(triton_style, tensors, n=64), tmp_path / "t.ktrace")
    msg = str(info.value)
    assert f"{THIS}:" in msg and "tl.load(ptr + start, (BLOCK,), dtype)" in msg
    assert "[64] tensor" in msg


def test_arange_plus_pointer_explains_it_too(tmp_path):
    @kb.kernel
    def reversed_order(x, *, n: int):
        tl.arange(0, n) + x

    with pytest.raises(kb.KernelError, match=r"\(pointer, shape\)"):
        kb.record(_case(reversed_order, {"x": kb.tensor((64,), "float32")}, n=64),
                  tmp_path / "t.ktrace")


def test_integer_like_pointer_offsets_still_work_and_others_do_not(tmp_path):
    import numpy as np

    @kb.kernel
    def offsets(x, y):
        a = tl.load(x + np.int64(8) - 8.0, (8,), tl.float32)
        tl.store(y + 0, a)

    tensors = {"x": kb.tensor((16,), "float32", init=kb.arange()),
               "y": kb.tensor((8,), "float32", role="output")}
    trace = kb.record(_case(offsets, tensors), tmp_path / "ok.ktrace")
    assert trace.n_ops == 2

    @kb.kernel
    def frac(x):
        tl.load(x + 0.5, (8,), tl.float32)

    with pytest.raises(kb.KernelError, match=r"pointer offset 0.5 is not an int"):
        kb.record(_case(frac, {"x": kb.tensor((16,), "float32")}), tmp_path / "bad.ktrace")


@pytest.mark.parametrize("args,needle", [
    (["record", "scale-exq"], "unknown case 'scale-exq'; did you mean 'scale-exp'?"),
    (["record", "scale-exp", "-p", "tiles=64"],
     "has no parameter(s) ['tiles']; did you mean 'tile'?"),
])
def test_unknown_case_or_parameter_suggests_the_closest_name(tmp_path, args, needle):
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "t.ktrace")])
    assert result.exit_code == 2 and needle in result.output
    assert not (tmp_path / "t.ktrace").exists()


def test_a_name_far_from_every_known_one_gets_no_guess():
    assert closest("zzzz", ["scale-exp", "gemm"]) == ""
    assert closest("gem", ["scale-exp", "gemm"]) == "; did you mean 'gemm'?"
