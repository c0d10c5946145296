"""A strided tile checked by its lowest and highest element only (ADR-0640) binds exactly as
the per-element check does: same bytes, indices, reads, writes and error messages."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.replay.memory_binders import ElementOperand
from kernbench.replay.store import MemoryStore, Operand
from kernbench.schemas import elements as ix
from kernbench.trace.hw import HwConfig

#: two float32 tensors with a gap between them, so tiles can straddle an edge or the gap
REGIONS = [(64, 64 + 4 * 60, "a"), (400, 400 + 4 * 50, "b")]


def _store() -> MemoryStore:
    store = MemoryStore(HwConfig().to_dict(), list(REGIONS))
    size = store.memory("hbm", 0).size
    data = np.random.default_rng(7).standard_normal(size // 4).astype(np.float32)
    store.fill("hbm", 0, 0, data.tobytes())
    return store


def _bind(store: MemoryStore, addr: int, attrs: dict, mask: np.ndarray | None,
          fast: bool) -> ElementOperand:
    shape = tuple(mask.shape) if mask is not None else (3, 4)
    raw = Operand("hbm", 0, addr, shape, "float32", False)
    rel, _ = ix.elements(attrs, shape)
    return ElementOperand(raw, store, rel, mask, ix.geometry(attrs, shape) if fast else None)


def _cases(n: int) -> list[tuple[int, dict, np.ndarray | None]]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        strides = [int(s) for s in rng.integers(-12, 13, 2)]
        attrs: dict = {"strides": strides}
        if rng.random() < 0.5:
            attrs["base"] = int(rng.integers(-20, 21))
        addr = int(rng.integers(0, 150)) * 4 + (2 if rng.random() < 0.05 else 0)
        mask = rng.random((3, 4)) < 0.7 if rng.random() < 0.4 else None
        out.append((addr, attrs, mask))
    return out


def test_the_bounds_check_agrees_with_the_per_element_check_on_random_tiles() -> None:
    store = _store()
    seen = {"fast ok": 0, "error": 0}
    for addr, attrs, mask in _cases(400):
        fast, slow = (_bind(store, addr, attrs, mask, f) for f in (True, False))
        assert fast.error == slow.error, (addr, attrs)
        if slow.error is not None:
            seen["error"] += 1
            continue
        seen["fast ok"] += fast.tile is not None
        assert (fast.lo, fast.hi, fast.region) == (slow.lo, slow.hi, slow.region)
        assert np.array_equal(fast.index, slow.index)  # type: ignore[arg-type]
        assert (fast.sel is None) == (slow.sel is None)
        assert np.array_equal(fast.gather(-1.0), slow.gather(-1.0))
    assert seen["fast ok"] > 50 and seen["error"] > 50  # both paths were exercised


def test_a_write_through_a_bounds_checked_tile_lands_on_the_same_elements() -> None:
    attrs = {"strides": [-5, 2], "base": 20}
    value = np.arange(12, dtype=np.float32).reshape(3, 4) + 100
    written = []
    for fast in (True, False):
        store = _store()
        op = _bind(store, 100, attrs, None, fast)
        assert op.error is None and (op.tile is not None) == fast
        op.view[...] = value
        written.append(store.read_bytes("hbm", 0, 0, store.memory("hbm", 0).size))
        assert np.array_equal(op.gather(), value)
    assert written[0] == written[1]


@pytest.mark.parametrize(("addr", "attrs", "message"), [
    (300, {"strides": [4, 1]}, "element at tile index [0, 1] (offset 1 from 300) is outside "
                               "tensor 'a' [64, 304)"),
    (64, {"strides": [4, 1], "base": -1}, "element at tile index [0, 0] (offset -1 from 64) "
                                          "is outside tensor 'a' [64, 304)"),
    (60, {"strides": [4, 1]}, "address 60 is inside no tensor of hbm"),
    (66, {"strides": [4, 1]}, "address 66 is not aligned to its float32 elements"),
])
def test_a_tile_leaving_its_tensor_keeps_the_per_element_message(addr, attrs, message) -> None:
    op = _bind(_store(), addr, attrs, None, True)
    assert op.tile is None and op.error is not None
    assert message in op.error


def test_rows_of_one_operand_and_one_tile_share_one_element_operand() -> None:
    from kernbench.replay.binding import BindContext
    from kernbench.replay.memory_binders import _elements

    store = _store()
    raw = store.operand("hbm", 0, 100, (3, 4), "float32", False)
    ctxs = [BindContext(store, pe) for pe in (0, 1)]  # rows of two programs
    one, two = (_elements({"strides": [5, 1]}, (raw,), None, c, "in")[0][0] for c in ctxs)
    other = _elements({"strides": [6, 1]}, (raw,), None, ctxs[0], "in")[0][0]
    assert one is two and other is not one
    assert np.array_equal(other.gather(), _bind(store, 100, {"strides": [6, 1]}, None,
                                                False).gather())
