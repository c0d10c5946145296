"""The hooks a kernel object calls (ADR-0625): ``kernel[grid](...)`` goes to the active host
(a ``kbt.capture``, innermost first; refused outside one), a helper called by attribute path
inside a body is rebound by the running launch, and a program's launch options
(``num_stages``) are scoped to its launch: nothing of a launch that raised is left behind."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.record.machine import pipeline
from kernbench.triton import core, jit, standin


@standin.jit
def _scale(x_ptr, n):
    return x_ptr + n


@standin.jit
def _twice(x):
    return x * 2


class _Holder:
    """Kernel objects a body reaches by attribute path (not rebound with the body)."""

    twice = _twice
    scale = _scale


HOLDER = _Holder()


@triton.jit
def helper_by_attribute(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, HOLDER.twice(tl.load(x_ptr + offs)) + 1)


@triton.jit
def launches_in_body(x_ptr, BLOCK: tl.constexpr):
    HOLDER.scale[(1,)](x_ptr, BLOCK)


@triton.jit
def staged(x_ptr, out_ptr, FAIL: tl.constexpr):
    acc = tl.zeros((4,), tl.float32)
    for i in tl.range(0, 2):
        acc += tl.load(x_ptr + i * 4 + tl.arange(0, 4))
    tl.static_assert(FAIL == 0, "asked to fail")
    tl.store(out_ptr + tl.arange(0, 4), acc)


class _Spy(kbt.Capture):
    """A capture that notes its launches instead of recording them (no replay worker)."""

    def __init__(self, out_dir: object) -> None:
        super().__init__(str(out_dir), pool=kb.ReplayPool())
        self.seen: list[tuple[object, ...]] = []

    def launch(self, kernel: object, grid: object, args: tuple[object, ...],
               kwargs: dict[str, object]) -> None:
        self.seen.append(args)


def test_a_launch_outside_a_capture_is_refused_naming_the_kernel() -> None:
    with pytest.raises(kb.BadInputError, match=r"JITFunction\(.*:_scale\)\[grid\]\(\.\.\.\) "
                                                r"outside kbt.capture"):
        _scale[(1,)](np.zeros(4, np.float32), 4)


def test_a_helper_called_in_host_code_is_refused_inside_a_capture_too(tmp_path) -> None:
    for host in (None, _Spy(tmp_path / "cap")):
        with pytest.raises(kb.BadInputError, match=r"_twice.*runs only inside a kernel"):
            if host is None:
                _twice(3)
            else:
                with host:
                    _twice(3)


def test_the_innermost_capture_gets_the_launch_and_the_outer_is_back_after_it(tmp_path
                                                                              ) -> None:
    outer, inner = _Spy(tmp_path / "outer"), _Spy(tmp_path / "inner")
    with outer:
        _scale[(1,)]("a", 1)
        with inner:
            _scale[(1,)]("b", 2)
            staged[(1,)]("c", 3)  # the Triton package's kernel, when it is installed
        _scale[(1,)]("d", 4)
    assert outer.seen == [("a", 1), ("d", 4)] and inner.seen == [("b", 2), ("c", 3)]
    assert jit.current_host() is jit.OUTSIDE
    with pytest.raises(kb.BadInputError, match="outside kbt.capture"):
        _scale[(1,)]("e", 5)


def test_a_helper_reached_by_attribute_runs_rebound_inside_the_body(tmp_path) -> None:
    x = np.arange(8, dtype=np.float32)
    c = kbt.case(helper_by_attribute, (1,), x, np.zeros_like(x), BLOCK=8, outputs=["out_ptr"])
    t = kb.record(c, out=tmp_path / "t.ktrace")
    got = kb.replay(t.path, in_process=True).outputs["out_ptr"]
    np.testing.assert_array_equal(got, 2 * x + 1)


def test_a_launch_inside_a_kernel_body_is_a_kernel_error_at_its_line(tmp_path) -> None:
    line = inspect.getsourcelines(launches_in_body.fn)[1] + 2  # the launch's line
    c = kbt.case(launches_in_body, (1,), np.zeros(4, np.float32), BLOCK=4, outputs=["x_ptr"])
    with pytest.raises(kb.KernelError, match=rf"test_front_end_hooks.py:{line}: JITFunction\("
                                             r".*:_scale\)\[grid\]\(\.\.\.\) inside a kernel body"):
        kb.record(c, out=tmp_path / "t.ktrace")


def test_a_failing_launch_leaves_no_stale_state(tmp_path, monkeypatch) -> None:
    """Each launch's loops pipeline by its own num_stages; the one that raised (inside a
    capture, too) leaves neither its options nor its host behind."""
    seen: list[int | None] = []
    real = pipeline.pipelined

    def spy(it: object, num_stages: int | None, *, src: str) -> object:
        seen.append(num_stages)
        return real(it, num_stages, src=src)

    monkeypatch.setattr(pipeline, "pipelined", spy)
    x, out = np.arange(8, dtype=np.float32), np.zeros(4, np.float32)

    def record(fail: int, **options: int) -> kb.Trace:
        c = kbt.case(staged, (1,), x, out, FAIL=fail, outputs=["out_ptr"], **options)
        return kb.record(c, out=tmp_path / f"t{len(seen)}.ktrace")

    with pytest.raises(kb.KernelError, match="static_assert failed: asked to fail"):
        record(1, num_stages=5)
    assert seen == [5] and core.launch_options() == core.DEFAULT_OPTIONS
    t = record(0, num_stages=2)
    record(0)
    assert seen == [5, 2, None]
    np.testing.assert_array_equal(kb.replay(t.path, in_process=True).outputs["out_ptr"],
                                  x[:4] + x[4:])
    with pytest.raises(kb.KernelError, match="asked to fail"), \
            kbt.Capture(tmp_path / "cap", pool=kb.ReplayPool()):
        staged[(1,)](x, out, FAIL=1, num_stages=3)
    assert seen[-1] == 3 and jit.current_host() is jit.OUTSIDE
    assert core.launch_options() == core.DEFAULT_OPTIONS
    with pytest.raises(kb.BadInputError, match="outside kbt.capture"):
        _scale[(1,)](x, 4)


def test_kbt_capture_stays_the_function_when_the_class_is_reached_first(monkeypatch) -> None:
    pkg, module = sys.modules["kernbench.triton"], sys.modules["kernbench.triton.capture"]
    monkeypatch.setattr(pkg, "capture", module)  # what importing the submodule first does
    monkeypatch.delattr(pkg, "Capture", raising=False)
    assert kbt.Capture is module.Capture and kbt.capture is module.capture
