"""ahbm-v2 hazards: a buffer reused while an async GEMM still reads it replays verified
because the writer waited (the scoreboard's WAR edge); with the WAR edge dropped
(``scoreboard.DROP_WAR``) the same replay fails."""

from __future__ import annotations

import numpy as np
import pytest
import triton
import triton.language as tl_triton

import kernbench as kb
from kernbench import tl
from kernbench import triton as kbt
from kernbench.record.machine import scoreboard

BIG = 64 * 1024  # a slow load (512 KiB of fp32): the GEMM starts long after its small input


@kb.kernel
def rewind_reuse(x0, x1, w, y):
    """``a`` lives in a scratch scope; after the scope the next load lands on its bytes."""
    with tl.scratch_scope():
        a = tl.load(x0, (16, 64), tl.float32)
        ww = tl.load(w, (64, BIG // 64), tl.float32)
        tl.store(y, tl.dot(a, ww * 2.0 + 1.0))  # the GEMM waits for two MATH ops
    b = tl.load(x1, (16, 64), tl.float32)
    tl.store(y + 16 * (BIG // 64), b)


@kb.kernel
def out_reuse(x0, x1, w, y):
    """``a`` is a persistent buffer: the second load overwrites it with ``out=`` (the GEMM
    waits for two MATH ops on ``w``, so without the WAR edge the load lands first)."""
    ww = tl.load(w, (64, BIG // 64), tl.float32)
    a = tl.load(x0, (16, 64), tl.float32)
    tl.store(y, tl.dot(a, ww * 2.0 + 1.0))
    tl.load(x1, (16, 64), tl.float32, out=a)
    tl.store(y + 16 * (BIG // 64), a)


def _reference(x0, x1, w, **_):
    n = BIG // 64
    return {"y": np.concatenate([(x0.reshape(16, 64) @ w.reshape(64, n)).ravel(),
                                 x1.ravel()])}


def _reference_affine(x0, x1, w, **_):
    return _reference(x0, x1, w * 2.0 + 1.0)


def _case(kernel, reference=_reference) -> kb.Case:
    return kb.Case(name="reuse", kernel=kernel, grid=(1,),
                   tensors={"x0": kb.tensor((16 * 64,), "float32", init=kb.randn(seed=1)),
                            "x1": kb.tensor((16 * 64,), "float32", init=kb.randn(seed=2)),
                            "w": kb.tensor((BIG,), "float32", init=kb.randn(seed=3)),
                            "y": kb.tensor((16 * (BIG // 64) + 16 * 64,), "float32",
                                           init=kb.zeros(), role="output")},
                   reference=reference)


@triton.jit
def _product(x0_ptr, w_ptr, N: tl_triton.constexpr):
    rows = tl_triton.arange(0, 16)[:, None]
    a = tl_triton.load(x0_ptr + rows * 64 + tl_triton.arange(0, 64)[None, :])
    ww = tl_triton.load(w_ptr + tl_triton.arange(0, 64)[:, None] * N
                        + tl_triton.arange(0, N)[None, :])
    return tl_triton.dot(a, ww * 2.0 + 1.0)  # the GEMM waits for two MATH ops


@triton.jit
def lifetime_reuse(x0_ptr, x1_ptr, w_ptr, y_ptr, N: tl_triton.constexpr):
    """``a`` dies when ``_product`` returns, its dot still queued; ``b``'s load takes its
    bytes (first fit)."""
    c = _product(x0_ptr, w_ptr, N)
    rows = tl_triton.arange(0, 16)[:, None]
    cols = tl_triton.arange(0, 64)[None, :]
    b = tl_triton.load(x1_ptr + rows * 64 + cols)
    tl_triton.store(y_ptr + rows * N + tl_triton.arange(0, N)[None, :], c)
    tl_triton.store(y_ptr + 16 * N + rows * 64 + cols, b)


def triton_case() -> kb.Case:
    rng = np.random.default_rng(0)
    n = BIG // 64
    x0, x1 = (rng.standard_normal(16 * 64, dtype=np.float32) for _ in range(2))
    w = rng.standard_normal(BIG, dtype=np.float32)
    y = np.zeros(16 * n + 16 * 64, np.float32)
    return kbt.case(lifetime_reuse, (1,), x0, x1, w, y, N=n, name="lifetime-reuse",
                    reference=lambda x0_ptr, x1_ptr, w_ptr, **_: {"y_ptr": _reference_affine(
                        x0_ptr, x1_ptr, w_ptr)["y"]})


CASES = {"scratch-scope-rewind": lambda: _case(rewind_reuse, _reference_affine),
         "out-into-persistent-buffer": lambda: _case(out_reuse, _reference_affine),
         "triton-value-lifetime": triton_case}


def _replay(name: str, tmp_path) -> kb.ReplayResult:
    factory = CASES[name]
    trace = kb.record(factory(), tmp_path / f"{name}.ktrace", hw="ahbm-v2")
    return kb.replay(trace.path, case=factory, in_process=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reuse_while_an_async_gemm_reads_replays_verified_because_the_writer_waited(
        name, tmp_path) -> None:
    res = _replay(name, tmp_path)
    assert res.ok and res.verdict.get("reference") is not None, res.verdict


@pytest.mark.parametrize("name", sorted(CASES))
def test_without_the_war_edge_the_same_replay_fails(name, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(scoreboard, "DROP_WAR", True)
    assert not _replay(name, tmp_path).ok
