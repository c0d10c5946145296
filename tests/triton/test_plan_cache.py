"""The Triton front end's per-launch caches (ADR-0585): index plans of loads/stores reused
across programs whose relative offsets and masks agree, and concrete index arithmetic
memoised by operand values. Neither may change a byte of the trace: a kernel whose programs
differ by control flow (a branch and a loop trip count on the program id), by mask (a
ragged tail) and by offset pattern (affine and wrapped) records the same ops.parquet,
access.parquet and tensors.parquet with the caches off, cold, warm and thrashing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.record.lowering import addressing
from kernbench.record.memo import BoundedMemo
from kernbench.triton import arith
from kernbench.triton.value import concrete

N, BLOCK = 200, 32  # 7 programs, the last one masked past n


@triton.jit
def branchy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if pid % 2 == 0:
        y = x * 2.0
    else:  # wrapped offsets: not affine, stored in access.parquet
        y = x + tl.load(x_ptr + (offs * 3) % n, mask=mask, other=0.0)
    for k in range(pid % 3):  # a trip count that differs between programs
        y = y + tl.load(x_ptr + (offs + k + 1) % n, mask=mask, other=0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def _reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    x, out = x_ptr, np.zeros(N, np.float32)
    offs = np.arange(N)
    for pid in range(-(-N // BLOCK)):
        o = offs[pid * BLOCK:(pid + 1) * BLOCK]
        y = x[o] * 2.0 if pid % 2 == 0 else x[o] + x[(o * 3) % N]
        for k in range(pid % 3):
            y = y + x[(o + k + 1) % N]
        out[o] = y
    return {"out_ptr": out}


def _record(tmp: Path, name: str) -> dict[str, str]:
    x = np.random.default_rng(0).standard_normal(N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    case = kbt.case(branchy_kernel, (-(-N // BLOCK),), x, out, N, BLOCK=BLOCK,
                    outputs=["out_ptr"], reference=_reference, name="branchy")
    path = tmp / f"{name}.ktrace"
    kb.record(case, path)
    return {f: hashlib.sha256((path / f).read_bytes()).hexdigest()
            for f in ("ops.parquet", "access.parquet", "tensors.parquet")}


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    mp = pytest.MonkeyPatch()
    mp.setattr(addressing, "CACHE", False)
    mp.setattr(arith, "MEMO", False)
    try:
        return _record(tmp_path_factory.mktemp("uncached"), "off")
    finally:
        mp.undo()


def test_caches_off_cold_and_warm_record_the_same_bytes(uncached, tmp_path,
                                                        monkeypatch) -> None:
    monkeypatch.setattr(addressing, "_PLANS", BoundedMemo())
    monkeypatch.setattr(arith, "_MEMO", BoundedMemo())
    cold = _record(tmp_path, "cold")
    plans, memo = len(addressing._PLANS), len(arith._MEMO)
    warm = _record(tmp_path, "warm")
    assert cold == uncached
    assert warm == uncached
    # reuse happened: 7 programs made 23 indexed loads/stores, fewer distinct plans, and a
    # warm run adds neither plans nor memo entries
    assert 0 < plans < 23
    assert memo > 0
    assert (len(addressing._PLANS), len(arith._MEMO)) == (plans, memo)


@pytest.mark.parametrize("limit", ["entries", "bytes"])
def test_caches_cleared_when_full_still_record_the_same_bytes(uncached, tmp_path, monkeypatch,
                                                              limit: str) -> None:
    monkeypatch.setattr(addressing, "_PLANS", BoundedMemo())
    monkeypatch.setattr(arith, "_MEMO", BoundedMemo())
    if limit == "entries":
        monkeypatch.setattr(addressing, "PLAN_LIMIT", 2)
        monkeypatch.setattr(arith, "MEMO_LIMIT", 3)
    else:  # 600 bytes: one 32-element plan (256 bytes of offsets, its mask, its stored)
        monkeypatch.setattr(addressing, "PLAN_BYTES", 600)
        monkeypatch.setattr(arith, "MEMO_BYTES", 600)
    assert _record(tmp_path, "small") == uncached
    if limit == "entries":
        assert 0 < len(addressing._PLANS) <= 2 and 0 < len(arith._MEMO) <= 3
    else:
        assert 0 < addressing._PLANS.held <= 600 and 0 < arith._MEMO.held <= 600


def test_the_recorded_kernel_replays_to_the_numpy_reference(tmp_path) -> None:
    x = np.random.default_rng(0).standard_normal(N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    case = kbt.case(branchy_kernel, (-(-N // BLOCK),), x, out, N, BLOCK=BLOCK,
                    outputs=["out_ptr"], reference=_reference, name="branchy")
    kb.record(case, tmp_path / "r.ktrace")
    res = kb.replay(tmp_path / "r.ktrace", case=lambda **_: case, in_process=True)
    assert res.ok, res.verdict


#: operands equal as Python values yet computing differently: the memo must tell them apart
SCALARS = [1, True, 1.0, 0.0, -0.0, 2**40]


def test_memoised_concrete_arithmetic_tells_apart_scalars_python_calls_equal(
        monkeypatch) -> None:
    monkeypatch.setattr(arith, "_MEMO", BoundedMemo())
    a = concrete(np.arange(4, dtype=np.int32) - 1)
    f = concrete(np.array([1.0, -1.0, 0.5], np.float32))

    def results() -> list[tuple[str, bytes]]:
        got = []
        for s in SCALARS:
            for op, x in (("add", a), ("div", f), ("mul", f)):
                try:
                    r = arith.binary(op, x, s)
                except Exception as exc:  # noqa: BLE001 - the refusal is part of the result
                    got.append((type(exc).__name__, str(exc).encode()))
                else:
                    got.append((r.dtype.name, r.value.tobytes()))
        return got

    monkeypatch.setattr(arith, "MEMO", False)
    want = results()
    monkeypatch.setattr(arith, "MEMO", True)
    assert results() == want  # cold
    assert results() == want  # every entry from the memo
    inf = np.array([np.inf, -np.inf, np.inf], np.float32)
    div = want[1::3]  # f / s for each scalar: by 0.0 and by -0.0 differ in sign
    assert div[3] == ("float32", inf.tobytes()) and div[4] == ("float32", (-inf).tobytes())
