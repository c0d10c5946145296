"""ADR-0063: tl.scratch_scope and tl.copy_to — O(1) scratch for long-context sweeps."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.kernels.registry import build_case
from kernbench.replay import replay
from tests.conftest import rewrite_ops, rows


@kb.kernel
def tiles_loop(x, *, n: int, scoped: bool):
    for _j in range(n):
        if scoped:
            with tl.scratch_scope():
                tl.exp(tl.load(x, (256,), tl.float32) * 2.0)
        else:
            tl.exp(tl.load(x, (256,), tl.float32) * 2.0)


def test_recycling(rec):
    """Peak cursor of an N-tile scoped loop is one tile's footprint, whatever N."""
    peaks = []
    for n in (1, 10, 100):
        trace = rec(tiles_loop, {"x": kb.tensor((256,), "float32")},
                    params={"n": n, "scoped": True})
        peaks.append(trace.manifest["scratch_peak_bytes"])
    assert peaks == [3 * 1024] * 3
    unscoped = rec(tiles_loop, {"x": kb.tensor((256,), "float32")},
                   params={"n": 100, "scoped": False})
    assert unscoped.manifest["scratch_peak_bytes"] == 100 * 3 * 1024  # grows linearly


def test_correctness(tmp_path, kb_replay_pool):
    """Phase 2: the scoped flash sweep gives the same O as the unscoped one (small N)."""
    outs = {}
    for scoped in (True, False):
        trace = kb.record(build_case("flash-attn", {"s_kv": 1024, "scoped": scoped}),
                          tmp_path / f"f{scoped}.ktrace")
        res = replay(trace.path, pool=kb_replay_pool)
        assert res.ok, res.verdict
        outs[scoped] = res.outputs["o"]
    np.testing.assert_array_equal(outs[True], outs[False])


def test_long_context(tmp_path):
    """A sweep whose unscoped scratch would exceed 1 MiB completes with scopes."""
    params = {"s_kv": 32768, "t_kv": 256}
    with pytest.raises(kb.ScratchOverflowError):
        kb.record(build_case("flash-attn", {**params, "scoped": False}), tmp_path / "u.ktrace")
    trace = kb.record(build_case("flash-attn", params), tmp_path / "s.ktrace")
    assert trace.manifest["scratch_peak_bytes"] < 1 << 20
    assert len(rows(trace, "scope_exit")) == 32768 // 256


@kb.kernel
def running_sum(x, y, *, n: int):
    total = tl.zeros((64,), tl.float32)  # persistent: allocated outside every scope
    for j in range(n):
        with tl.scratch_scope():
            t = tl.load(x + j * 64, (64,), tl.float32)
            tl.copy_to(total, total + t * t)
    tl.store(y, total)


def test_persistent_vs_scoped_isolation(tmp_path):
    """The running state allocated outside the scope keeps its value after every exit."""
    n = 12
    case = kb.Case("rs", running_sum, (1,),
                   {"x": kb.tensor((n * 64,), "float32", init=kb.randn(seed=31)),
                    "y": kb.tensor((64,), "float32", role="output")}, {"n": n},
                   reference=lambda x: {"y": (x.reshape(n, 64) ** 2).sum(axis=0)})
    trace = kb.record(case, tmp_path / "rs.ktrace")
    fill = rows(trace, "fill")[0]
    for c in rows(trace, "copy"):
        assert c["output"]["addr"] == fill["output"]["addr"]  # always the persistent bytes
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict


def test_nesting(rec):
    """Inner exit rewinds to the inner save-point, outer exit to the outer one."""
    cursors = {}

    @kb.kernel
    def nested(x):
        tl.zeros((4,), tl.float32)  # 16 bytes before any scope
        with tl.scratch_scope():
            tl.zeros((8,), tl.float32)  # 32 bytes in the outer scope
            with tl.scratch_scope():
                tl.zeros((16,), tl.float32)  # 64 bytes in the inner scope
            inner_exit = tl.zeros((1,), tl.float32)
            cursors["after_inner"] = inner_exit.addr
        cursors["after_outer"] = tl.zeros((1,), tl.float32).addr

    trace = rec(nested, {"x": kb.tensor((1,), "float32")})
    assert cursors == {"after_inner": 48, "after_outer": 16}
    exits = rows(trace, "scope_exit")
    assert [(e["scope_depth"], e["scratch_cursor"]) for e in exits] == [(2, 48), (1, 16)]
    assert [e["attrs"] for e in exits] == ['{"hi":112,"lo":48}', '{"hi":64,"lo":16}']


def test_use_after_scope_raises_in_phase_1_naming_both_sites(rec):
    kept = {}

    @kb.kernel
    def leaky(x):
        with tl.scratch_scope():
            kept["h"] = tl.zeros((4,), tl.float32)  # ALLOC
        tl.exp(kept["h"])  # USE

    lines, start = inspect.getsourcelines(leaky.fn)
    alloc = start + next(i for i, t in enumerate(lines) if "# ALLOC" in t)
    use = start + next(i for i, t in enumerate(lines) if "# USE" in t)
    with pytest.raises(kb.ScratchScopeError, match=rf"allocated at .*test_scratch_scope.py:"
                                                   rf"{alloc} .*exited") as info:
        rec(leaky, {"x": kb.tensor((1,), "float32")})
    assert info.value.src.endswith(f"test_scratch_scope.py:{use}")


@kb.kernel
def persist(x, y):
    keep = tl.zeros((64,), tl.float32)
    with tl.scratch_scope():
        t = tl.exp(tl.load(x, (64,), tl.float32))
        tl.copy_to(keep, t)
    tl.store(y, keep * 2.0)


def test_a_trace_edited_to_read_rewound_scratch_fails_phase_2_naming_the_op(tmp_path):
    case = kb.Case("persist", persist, (1,),
                   {"x": kb.tensor((64,), "float32", init=kb.randn(seed=3)),
                    "y": kb.tensor((64,), "float32", role="output")},
                   reference=lambda x: {"y": np.exp(x) * 2})
    trace = kb.record(case, tmp_path / "p.ktrace")
    assert replay(trace.path, case=lambda: case, in_process=True).ok
    exp_out = rows(trace, "exp")[0]["output"]
    mul_id = rows(trace, "mul")[0]["op_id"]

    def point_mul_at_rewound_bytes(ops):
        ops[mul_id]["inputs"][0] = dict(exp_out)  # read t (rewound) instead of keep

    rewrite_ops(trace.path, point_mul_at_rewound_bytes)
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert not res.ok
    text = str(res.verdict)
    assert "invalid" in text and f"{mul_id}" in text and "mul" in text


def test_a_load_never_consumed_inside_a_scope_is_drained_at_exit(tmp_path):
    @kb.kernel
    def orphan(x, y):
        keep = tl.full((256,), 1.0, tl.float32)
        with tl.scratch_scope():
            tl.load(x, (256,), tl.float32)  # never consumed
        reuse = tl.full((256,), 5.0, tl.float32)  # lands on the rewound bytes
        tl.store(y, keep + reuse)

    case = kb.Case("orphan", orphan, (1,),
                   {"x": kb.tensor((256,), "float32", init=kb.randn(seed=4)),
                    "y": kb.tensor((256,), "float32", role="output")},
                   reference=lambda x: {"y": np.full(256, 6.0, np.float32)})
    trace = kb.record(case, tmp_path / "o.ktrace")
    (ld,) = rows(trace, "dma_read")
    (ex,) = rows(trace, "scope_exit")
    assert ex["t_issue_ps"] == ld["t_end_ps"] and ex["wait_ps"] > 0
    fill2 = rows(trace, "fill")[1]
    assert fill2["output"]["addr"] == ld["output"]["addr"]  # the recycled bytes
    assert fill2["t_start_ps"] >= ld["t_end_ps"]
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict


def test_single_head_flash_sweep_over_1m_tokens_has_the_peak_scratch_of_1k(tmp_path):
    small = kb.record(build_case("flash-attn", {"s_kv": 1024}), tmp_path / "1k.ktrace")
    big = kb.record(build_case("flash-attn", {"s_kv": 1 << 20}), tmp_path / "1m.ktrace")
    assert big.manifest["scratch_peak_bytes"] == small.manifest["scratch_peak_bytes"]
    assert big.n_ops > 500 * small.n_ops


@pytest.mark.parametrize("dst,src,error,needle", [
    ("tcm4", "tcm5", kb.KernelError, r"copy_to shapes differ: dst \[4\] vs src \[5\]"),
    ("tcm4", "bf4", kb.KernelError, "copy_to dtypes differ: dst float32 vs src bfloat16"),
])
def test_copy_to_checks_shape_and_dtype_at_emit_time(rec, dst, src, error, needle):
    @kb.kernel
    def bad(x):
        made = {"tcm4": tl.zeros((4,), tl.float32), "tcm5": tl.zeros((5,), tl.float32),
                "bf4": tl.zeros((4,), tl.bfloat16)}
        tl.copy_to(made[dst], made[src])

    with pytest.raises(error, match=needle):
        rec(bad, {"x": kb.tensor((1,), "float32")})


def test_copy_to_costs_math_elements(rec):
    @kb.kernel
    def cp(x):
        a = tl.zeros((1000,), tl.float32)
        tl.copy_to(a, tl.zeros((1000,), tl.float32))

    trace = rec(cp, {"x": kb.tensor((1,), "float32")})
    (c,) = rows(trace, "copy")
    assert c["kind"] == "math" and c["engine"] == "math" and c["num_elements"] == 1000
    assert c["busy_ps"] == (8 + 8) * 1000
