"""ADR-0061: tl.broadcast / tl.repeat — data-faithful replication."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.kernels.registry import build_case
from kernbench.replay import replay
from tests.conftest import rows


@kb.kernel
def bcast_kv(k, *, S: int, G: int, d: int):  # noqa: N803
    kt = tl.load(k, (S, 1, d), tl.bfloat16)
    tl.broadcast(kt, (S, G, d))


def test_phase_1_timing(rec):
    """[S,1,d] -> [S,G,d]: one math/broadcast with S*G*d elements, MATH cost, no DMA."""
    s, g, d = 16, 8, 128
    trace = rec(bcast_kv, {"k": kb.tensor((s, d), "bfloat16")}, params={"S": s, "G": g, "d": d})
    (b,) = rows(trace, "broadcast")
    assert (b["kind"], b["engine"]) == ("math", "math")
    assert b["num_elements"] == s * g * d and b["nbytes"] == s * g * d * 2
    assert b["output"]["shape"] == [s, g, d]
    assert b["busy_ps"] == (-(-s * g * d // 128) + 8) * 1000
    assert len(rows(trace, "dma_read")) == 1  # only the kernel's own load of K


@kb.kernel
def bcast_then_dot(a, b, y):
    row = tl.load(a, (1, 32), tl.float32)  # one query row ...
    wide = tl.broadcast(row, (8, 32))  # ... replicated for 8 heads
    w = tl.load(b, (32, 16), tl.float32)
    tl.store(y, tl.dot(wide, w))


def test_phase_2_data(tmp_path):
    """broadcast_to(...).copy() semantics; the downstream dot passes the nbytes check."""
    case = kb.Case("bd", bcast_then_dot, (1,),
                   {"a": kb.tensor((1, 32), "float32", init=kb.randn(seed=61)),
                    "b": kb.tensor((32, 16), "float32", init=kb.randn(seed=62)),
                    "y": kb.tensor((8, 16), "float32", role="output")},
                   reference=lambda a, b: {"y": np.broadcast_to(a, (8, 32)) @ b})
    trace = kb.record(case, tmp_path / "bd.ktrace")
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict
    a = case.tensors["a"].init.make((1, 32), case.tensors["a"].dtype)
    b = case.tensors["b"].init.make((32, 16), case.tensors["b"].dtype)
    np.testing.assert_allclose(res.outputs["y"], np.broadcast_to(a, (8, 32)).copy() @ b,
                               rtol=1e-5, atol=1e-5)


def test_gqa_end_to_end(tmp_path, kb_replay_pool):
    """Reduced h_q = 8, h_kv = 1 causal GQA attention (mask replicated across the G heads
    with tl.broadcast) completes Phase 2 and matches the numpy reference."""
    params = {"S": 256, "T_q": 16, "T_kv": 64, "H_q": 8, "H_kv": 1}
    trace = kb.record(build_case("gqa-prefill", params), tmp_path / "gqa.ktrace")
    assert len(rows(trace, "broadcast")) > 0
    res = replay(trace.path, pool=kb_replay_pool)
    assert res.ok, res.verdict
    assert res.outputs["o"].shape == (1, 256, 8, 128)


@kb.kernel
def bad_bcast(x):
    a = tl.zeros((3, 4), tl.float32)
    tl.broadcast(a, (8, 4))  # BAD


def test_broadcast_incompatible_shape(rec):
    """Axis 3 -> 8 raises at emit time naming both shapes and the kernel line."""
    lines, start = inspect.getsourcelines(bad_bcast.fn)
    line = start + next(i for i, t in enumerate(lines) if "# BAD" in t)
    with pytest.raises(kb.KernelError, match=r"cannot broadcast \[3, 4\] to \[8, 4\]") as info:
        rec(bad_bcast, {"x": kb.tensor((1,), "float32")})
    assert info.value.src.endswith(f"test_broadcast.py:{line}")


def test_repeat_inserts_an_axis_and_replicates(tmp_path):
    @kb.kernel
    def rep(x, y):
        t = tl.load(x, (4, 3), tl.float32)
        tl.store(y, tl.repeat(t, 1, 5))

    case = kb.Case("rep", rep, (1,),
                   {"x": kb.tensor((4, 3), "float32", init=kb.arange()),
                    "y": kb.tensor((4, 5, 3), "float32", role="output")},
                   reference=lambda x: {"y": np.repeat(x[:, None, :], 5, axis=1)})
    trace = kb.record(case, tmp_path / "rep.ktrace")
    (b,) = rows(trace, "broadcast")
    assert b["output"]["shape"] == [4, 5, 3] and b["inputs"][0]["shape"] == [4, 1, 3]
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok and res.max_abs_err["y"] == 0.0
