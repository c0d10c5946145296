"""What an op still reading its TCM operands holds when the kernel goes on (issue 27,
ADR-0545): a gather's or an atomic's offsets, mask and values stay busy until its output
lands, so a value dying meanwhile frees those bytes only for writers that wait for that
(lifetime mode's free list, a scope's rewind). The lowering calls it after issuing the op,
and ``retime`` after issuing it again."""

from __future__ import annotations

from typing import Any

from kernbench.schemas.ops import ATOMICS, OP

#: the ops whose TCM inputs stay held until their output lands
HOLDING = frozenset({OP.GATHER, *ATOMICS})


def hold_inputs(cmd: Any) -> None:
    """Keep ``cmd``'s TCM inputs busy (``read_until``) until its output is visible."""
    assert cmd.out is not None  # a gather or atomic writes its TCM output
    until = cmd.out.buf.ready_ps
    for h in cmd.inputs:
        b = h.buf
        if b.space != "hbm" and until > b.read_until:
            b.read_until = until
