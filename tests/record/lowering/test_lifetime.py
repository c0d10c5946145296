"""Scratch without scopes (``record/lowering/lifetime.py``): values live until no handle
refers to them."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.analyze import check
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering.lifetime import lifetime_scope, live_bytes, release, retain
from kernbench.record.machine.allocator import FreeListAllocator
from kernbench.replay import replay
from kernbench.schemas import dtypes
from tests.conftest import rows


class Value:
    """What the Triton front end does with a handle: count it while a value refers to it."""

    __slots__ = ("h",)

    def __init__(self, h: TensorHandle) -> None:
        self.h = h
        retain(h)

    def __del__(self) -> None:
        release(self.h)


def _clean(trace: kb.Trace) -> list[tuple[str, int]]:
    return [(r.name, r.count) for r in check(trace).invariants if r.count]


# -- the allocator on its own -------------------------------------------------------------
def _arena(budget: int = 1024) -> tuple[FreeListAllocator, list[int]]:
    clock = [0]
    return FreeListAllocator("tcm", 0, budget, 16, lambda: clock[0]), clock


def _free(arena: FreeListAllocator, buf) -> None:
    release(TensorHandle(buf, (1,), dtypes.int8))


def test_first_fit_reuses_the_lowest_hole_and_coalesces():
    arena, _ = _arena()
    a, b, c = (arena.alloc(n, None, "k.py:1") for n in (100, 40, 64))
    assert (a.addr, b.addr, c.addr) == (0, 112, 160)  # 16-byte aligned
    assert arena.cursor == 224
    _free(arena, b)
    assert arena.alloc(30, None, "k.py:2").addr == 112  # the hole fits
    _free(arena, a)
    _free(arena, c)
    assert arena.cursor == 144  # the top block went free: the cursor falls to what is used
    assert arena.alloc(112, None, "k.py:3").addr == 0
    assert arena.peak == 224


def test_freed_bytes_carry_when_their_last_op_completes():
    arena, clock = _arena()
    a = arena.alloc(64, None, "k.py:1")
    a.ready_ps = 9_000  # a lazy load still landing into it
    clock[0] = 1_000
    _free(arena, a)
    b = arena.alloc(64, None, "k.py:2")
    assert b.addr == a.addr and b.read_until == 9_000  # its first writer waits for the load


def test_a_view_keeps_its_buffer_until_the_last_value_dies():
    arena, _ = _arena()
    buf = arena.alloc(64, None, "k.py:1")
    base, view = TensorHandle(buf, (16,), dtypes.float32), TensorHandle(buf, (4, 4), dtypes.float32)
    retain(base)
    retain(view)
    release(base)
    assert buf in arena.live
    release(view)
    assert buf not in arena.live
    release(view)  # a second release is a no-op
    assert live_bytes(arena) == 0


def test_release_after_the_program_ended_is_ignored():
    arena, _ = _arena()
    buf = arena.alloc(64, None, "k.py:1")
    arena.closed = True
    _free(arena, buf)
    assert buf in arena.live


# -- kernels ------------------------------------------------------------------------------
@kb.kernel
def long_loop(x, y, *, n: int, lifetime: bool):
    """acc += 2 * x[i] over n tiles, keeping nothing by hand."""
    with lifetime_scope():
        acc = Value(tl.zeros((64,), tl.float32))
        for i in range(n):
            v = Value(tl.load(x + (i % 4) * 64, (64,), tl.float32))
            w = Value(v.h * 2.0)
            acc = Value(acc.h + w.h)
        tl.store(y, acc.h)


def _long_case(n: int) -> kb.Case:
    return kb.Case("long", long_loop, (1,), {
        "x": kb.tensor((256,), "float32", init=kb.randn(seed=4)),
        "y": kb.tensor((64,), "float32", role="output")}, {"n": n, "lifetime": True},
        reference=lambda x, **_: {"y": 2 * sum((x.reshape(4, 64)[i % 4] for i in range(n)),
                                             np.zeros(64, np.float32))})


def test_a_ten_thousand_iteration_loop_runs_in_constant_scratch(tmp_path):
    short = kb.record(_long_case(10), tmp_path / "short.ktrace")
    long = kb.record(_long_case(10_000), tmp_path / "long.ktrace")
    peak = short.manifest["scratch_peak_bytes"]
    assert peak == long.manifest["scratch_peak_bytes"] <= 5 * 256
    assert max(long.ops["scratch_cursor"].to_list()) == peak


def test_lifetime_trace_is_race_free_and_replays(tmp_path):
    case = _long_case(12)
    trace = kb.record(case, tmp_path / "t.ktrace")
    assert _clean(trace) == []
    res = replay(trace.path, case=lambda: case, in_process=True)
    assert res.ok, res.verdict


@kb.kernel
def unused_load(x, y):
    with lifetime_scope():
        Value(tl.load(x, (4096,), tl.float32))  # dies at once, its DMA still in flight
        z = Value(tl.full((4096,), 1.0, tl.float32))  # reuses those bytes
        tl.store(y, z.h)


def test_reused_bytes_wait_for_an_in_flight_load_of_a_dead_value(rec):
    trace = rec(unused_load, {"x": kb.tensor((4096,), "float32"),
                              "y": kb.tensor((4096,), "float32", role="output")})
    ld, fill = rows(trace, "dma_read")[0], rows(trace, "fill")[0]
    assert fill["output"]["addr"] == ld["output"]["addr"]
    assert fill["t_start_ps"] >= ld["t_end_ps"]
    assert _clean(trace) == []


@kb.kernel
def hoard(x, *, n: int):
    with lifetime_scope():
        kept = [Value(tl.load(x, (16384,), tl.float32)) for _ in range(n)]  # 64 KiB each
        del kept


def test_overflow_names_the_live_allocations_by_line(rec):
    with pytest.raises(kb.ScratchOverflowError,
                       match=r"requested 65536 bytes at 1048576 .* 16 live allocations: "
                             r"tests/record/lowering/test_lifetime.py:\d+: 1.0 MiB in 16 buffers"):
        rec(hoard, {"x": kb.tensor((16384,), "float32")}, params={"n": 17})


@kb.kernel
def scoped_in_lifetime(x):
    with lifetime_scope():
        with tl.scratch_scope():
            Value(tl.load(x, (4,), tl.float32))


def test_scratch_scope_in_lifetime_mode_is_a_kernel_error(rec):
    with pytest.raises(kb.KernelError, match="scratch_scope is not available in lifetime"):
        rec(scoped_in_lifetime, {"x": kb.tensor((4,), "float32")})


@kb.kernel
def mixed(x, y):
    a = tl.load(x, (64,), tl.float32)  # bump-allocated before the lifetime scope
    with lifetime_scope():
        b = Value(a * 3.0)
        tl.store(y, b.h)


def test_bump_bytes_taken_before_the_scope_stay_reserved(rec):
    trace = rec(mixed, {"x": kb.tensor((64,), "float32"),
                        "y": kb.tensor((64,), "float32", role="output")})
    mul = rows(trace, "mul")[0]
    assert mul["output"]["addr"] == 256 and mul["scratch_cursor"] == 512
    assert trace.manifest["scratch_peak_bytes"] == 512
