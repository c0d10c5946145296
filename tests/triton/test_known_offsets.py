"""Index plans looked up by what a pointer value knows of its offsets (ADR-0690): a pointer
advanced by a scalar, or a pointer plus a memoised integer block, carries its relative
offsets and extent, so a repeated load/store reads no offset; frozen masks and stored arrays
are remembered by identity. None of it may change a byte of the trace or an error."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
import kernbench.triton.language  # noqa: F401 - binds the operators of tl.tensor
from kernbench import triton as kbt
from kernbench.errors import BoundsError, UnsupportedError
from kernbench.record.handle import HbmTensor
from kernbench.record.lowering import addressing, indexplan
from kernbench.record.memo import BoundedMemo
from kernbench.schemas import dtypes
from kernbench.triton import arith, memory, value
from kernbench.triton import dtypes as d
from kernbench.triton.value import Pointer, concrete, pointer

M, K, BLOCK = 40, 100, 16  # K is ragged: the last step is masked; M wraps (not affine)


@triton.jit
def stepping_kernel(x_ptr, out_ptr, M, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = (pid * BLOCK + tl.arange(0, BLOCK)) % M
    cols = tl.arange(0, BLOCK)
    ptrs = x_ptr + rows[:, None] * K + cols[None, :]
    back = x_ptr + rows[:, None] * K + (K - BLOCK) + cols[None, :]
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK)):
        acc += tl.load(ptrs, mask=cols[None, :] < K - k * BLOCK, other=0.0)
        acc += tl.load(back)  # stepped backwards by subtraction, never masked
        ptrs += BLOCK
        back = back - BLOCK if k < (K - BLOCK) // BLOCK else back
    out = out_ptr + pid * BLOCK * BLOCK + tl.arange(0, BLOCK)[:, None] * BLOCK
    tl.store(out + tl.arange(0, BLOCK)[None, :], acc)


def _reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    x = x_ptr.reshape(M, K).astype(np.float32)
    progs = -(-M // BLOCK)
    out = np.zeros((progs, BLOCK, BLOCK), np.float32)
    steps = -(-K // BLOCK)
    for pid in range(progs):
        rows = (pid * BLOCK + np.arange(BLOCK)) % M
        for k in range(steps):
            c = k * BLOCK + np.arange(BLOCK)
            out[pid] += np.where(c < K, x[rows][:, np.minimum(c, K - 1)], 0)
            b = (K - BLOCK) - min(k, (K - BLOCK) // BLOCK) * BLOCK
            out[pid] += x[rows][:, b:b + BLOCK]
    return {"out_ptr": out.reshape(-1)}


def _case() -> kb.Case:
    x = np.random.default_rng(1).standard_normal(M * K, dtype=np.float32)
    out = np.zeros(-(-M // BLOCK) * BLOCK * BLOCK, np.float32)
    return kbt.case(stepping_kernel, (-(-M // BLOCK),), x, out, M, K, BLOCK=BLOCK,
                    outputs=["out_ptr"], reference=_reference, name="stepping")


def _record(tmp: Path, name: str) -> dict[str, str]:
    path = tmp / f"{name}.ktrace"
    kb.record(_case(), path)
    return {f: hashlib.sha256((path / f).read_bytes()).hexdigest()
            for f in ("ops.parquet", "access.parquet", "tensors.parquet")}


def test_known_offsets_record_the_bytes_of_plain_planning(tmp_path, monkeypatch) -> None:
    with monkeypatch.context() as mp:
        mp.setattr(addressing, "CACHE", False)
        mp.setattr(arith, "MEMO", False)
        plain = _record(tmp_path, "off")
    cold = _record(tmp_path, "cold")
    warm = _record(tmp_path, "warm")
    assert cold == plain and warm == plain
    assert indexplan.MASKED, "the ragged step's frozen mask was planned by identity"


def test_known_offsets_replay_to_the_reference(tmp_path, kb_replay_pool) -> None:
    kb.record(_case(), tmp_path / "t.ktrace")
    res = kb.replay(tmp_path / "t.ktrace", case=_case, pool=kb_replay_pool)
    assert res.ok and res.verdict["reference"], res.verdict


@triton.jit
def overrun_kernel(x_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr, LIVE: tl.constexpr):
    ptrs = x_ptr + tl.arange(0, BLOCK)
    live = tl.arange(0, BLOCK) < LIVE  # all true, or the same frozen mask every step
    tl.load(ptrs)  # unmasked first: the pointer learns its offsets
    for _ in range(STEPS):
        ptrs += 12
        tl.load(ptrs, mask=live)


def _overrun_error(tmp: Path, live: int) -> str:
    x = np.zeros(64, np.float32)
    case = kbt.case(overrun_kernel, (1,), x, 64, BLOCK=16, STEPS=6, LIVE=live, name="overrun")
    with pytest.raises(BoundsError) as err:
        kb.record(case, tmp / "o.ktrace")
    return str(err.value)


@pytest.mark.parametrize(("live", "told"), [(16, "offset 64 at tile index [4]"),
                                            (6, "offset 64 at tile index [4]"),
                                            (3, "offset 72 at tile index [0]")])
def test_a_known_pointer_past_the_end_is_refused_as_before(tmp_path, monkeypatch, live,
                                                           told) -> None:
    with monkeypatch.context() as mp:
        mp.setattr(addressing, "CACHE", False)
        plain = _overrun_error(tmp_path, live)
    assert told in plain and "test_known_offsets.py" in plain, plain
    assert _overrun_error(tmp_path, live) == plain


def _ptr(offs: np.ndarray | int) -> Pointer:
    t = HbmTensor("x", 0, (1 << 20,), dtypes.float32)
    return pointer(t, np.asarray(offs, np.int64), d.float32)


def _expect(p: Pointer) -> tuple:
    o = np.asarray(p.offsets)
    lo = int(o.min())
    return ((o.shape, (o - lo).tobytes()), lo, int(o.max()))


def _learnt(offs: np.ndarray) -> Pointer:
    p = _ptr(offs)
    p.rel = _expect(p)  # as addressing learns it at an unmasked access
    return p


def test_a_pointer_moved_by_a_scalar_or_a_block_knows_its_offsets() -> None:
    base = _learnt(np.array([[5, 9, 7], [30, 31, 32]]))
    block = arith.binary("mul", concrete(np.arange(3, dtype=np.int32)), 4)
    got = [base + 7, 7 + base, base - 3, base + concrete(np.int32(-2)),
           base + block, _ptr(11) + block, _ptr(0) + block + 1]
    for p in got:
        assert isinstance(p, Pointer) and p.rel == _expect(p)


def test_a_pointer_loses_what_it_knew_when_it_cannot_follow() -> None:
    base = _learnt(np.array([3, 1, 2]))
    assert (base + concrete(np.array([0, 5, 1]))).rel is None  # a block without a memo key
    assert (base - arith.binary("add", concrete(np.arange(3)), 1)).rel is None  # subtracted
    top = _learnt(np.array([0, (1 << 63) - 8]))
    wrapped = top + 16  # int64 wraps: the relative offsets changed
    assert wrapped.rel is None
    assert _ptr(np.array([1, 2])).rel is None  # nothing learnt yet


def test_only_frozen_masks_are_remembered_by_identity() -> None:
    m = np.array([True, False, True])
    assert addressing._mask(m, (3,), "t", "x.py:1") is not m  # writable: copied, not kept
    assert id(m) not in indexplan.MASKS
    m.flags.writeable = False
    got = addressing._mask(m, (3,), "t", "x.py:1")
    assert got is not None and not got.flags.writeable and got.tolist() == m.tolist()
    assert indexplan.MASKS[id(m)] == (m, got)
    assert addressing._mask(m, (3,), "t", "x.py:1") is got  # the same object again
    full = np.ones(3, bool)
    full.flags.writeable = False
    assert addressing._mask(full, (3,), "t", "x.py:1") is None


def test_rel_is_no_tensor_member_a_kernel_sees() -> None:
    """``rel`` is set on every pointer; on other values it is refused like any name Triton's
    ``tl.tensor`` lacks (the message it had before pointers carried it)."""
    with pytest.raises(UnsupportedError, match="has no attribute 'rel' either"):
        _ = concrete(np.arange(3)).rel  # type: ignore[attr-defined]
    assert _ptr(np.array([1, 2])).rel is None and "rel" not in value._FIELDS


@triton.jit
def block_kernel(x_ptr, out_ptr, M, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(base=x_ptr, shape=(M, K), strides=(K, 1), offsets=(pid * BLOCK, 0),
                            block_shape=(BLOCK, BLOCK), order=(1, 0))
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK)):
        acc += tl.load(src, boundary_check=(0, 1), padding_option="zero")
        src = tl.advance(src, (0, BLOCK))
    dst = tl.make_block_ptr(base=out_ptr, shape=(M, BLOCK), strides=(BLOCK, 1),
                            offsets=(pid * BLOCK, 0), block_shape=(BLOCK, BLOCK), order=(1, 0))
    tl.store(dst, acc, boundary_check=(0,))


def _block_reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    x = x_ptr.reshape(M, K).astype(np.float32)
    pad = np.zeros((M, -(-K // BLOCK) * BLOCK), np.float32)
    pad[:, :K] = x
    return {"out_ptr": pad.reshape(M, -1, BLOCK).sum(axis=1).reshape(-1)}


def _block_case() -> kb.Case:
    x = np.random.default_rng(2).standard_normal(M * K, dtype=np.float32)
    out = np.zeros(M * BLOCK, np.float32)
    return kbt.case(block_kernel, (-(-M // BLOCK),), x, out, M, K, BLOCK=BLOCK,
                    outputs=["out_ptr"], reference=_block_reference, name="blocks")


def test_block_pointers_learn_their_geometry_and_record_the_same_bytes(
        tmp_path, monkeypatch, kb_replay_pool) -> None:
    def digests(name: str) -> dict[str, str]:
        path = tmp_path / f"{name}.ktrace"
        kb.record(_block_case(), path)
        return {f: hashlib.sha256((path / f).read_bytes()).hexdigest()
                for f in ("ops.parquet", "access.parquet", "tensors.parquet")}

    monkeypatch.setattr(memory, "_BLOCK_RELS", BoundedMemo())
    with monkeypatch.context() as mp:
        mp.setattr(addressing, "CACHE", False)
        plain = digests("off")
    assert digests("cold") == plain and digests("warm") == plain
    assert ((BLOCK, BLOCK), (K, 1)) in memory._BLOCK_RELS  # learnt from an unmasked step
    res = kb.replay(tmp_path / "warm.ktrace", case=_block_case, pool=kb_replay_pool)
    assert res.ok and res.verdict["reference"], res.verdict
