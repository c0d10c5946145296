"""The value graph noted at issue and keyed at decision (``Shadow.issue``, ``Late.land``;
ADR-0843): the chip issues an op before it decides its times, so an HBM write is seen by
no evaluation until it lands, and then at its end in replay's order; a read at its start."""

from __future__ import annotations

import numpy as np

from kernbench.record.commands import Cmd
from kernbench.record.guards.evaluate import decide
from kernbench.record.guards.graph import Shadow
from kernbench.record.guards.hbm import Hbm
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.schemas.dtypes import by_name
from kernbench.schemas.elements import AccessTable
from kernbench.schemas.ops import OP

I32 = by_name("int32")
INITIAL = np.array([1, 2, 3, 4], np.int32)
ADDR = 4096


def _setup() -> tuple[Shadow, TensorHandle, Cmd, Cmd]:
    """A graph over one tensor, the write of a TCM block of 9s into it, and its read back."""
    shadow = Shadow(Hbm({"t": (ADDR, 4, np.dtype(np.int32), lambda: INITIAL)}), AccessTable({}))
    hbm = TensorHandle(Buffer("hbm", 0, ADDR, 16, None, "k.py:1"), (4,), I32)
    nines = TensorHandle(Buffer("tcm", 0, 0, 16, None, "k.py:2"), (4,), I32)
    fill = Cmd(OP.FILL, (), nines, 4, 16, (4,), "k.py:2", attrs='{"value":9}')
    assert shadow.issue(fill, 0, False) is None  # a TCM op: nothing to key
    write = Cmd(OP.DMA_WRITE, (nines,), hbm, 4, 16, (16,), "k.py:3")
    back = TensorHandle(Buffer("tcm", 0, 64, 16, None, "k.py:4"), (4,), I32)
    read = Cmd(OP.DMA_READ, (hbm,), back, 4, 16, (16,), "k.py:4")
    return shadow, back, write, read


def test_a_write_issued_but_not_decided_is_seen_by_no_read():
    shadow, back, write, read = _setup()
    late_w = shadow.issue(write, 1, False)
    assert late_w is not None and not shadow.hbm.tensors[0].effects
    late_r = shadow.issue(read, 2, False)
    assert late_r is not None
    late_r.land(5_000, 6_000)
    assert late_r.node is not None and late_r.node.key == (5_000, 1, 2)
    np.testing.assert_array_equal(decide(shadow, back, "k.py:5"), INITIAL)


def test_a_decided_write_lands_at_its_end_before_a_read_starting_then():
    for end, read_at, want in ((3_000, 3_000, np.full(4, 9)), (3_001, 3_000, INITIAL)):
        shadow, back, write, read = _setup()
        late_w, late_r = shadow.issue(write, 1, False), shadow.issue(read, 2, False)
        assert late_w is not None and late_r is not None
        late_r.land(read_at, read_at + 500)  # decided in either order: the keys decide
        late_w.land(1_000, end)
        assert [e.key for e in shadow.hbm.tensors[0].effects] == [(end, 0, 1)]
        np.testing.assert_array_equal(decide(shadow, back, "k.py:5"), want)
