"""The ``philox`` op family's builder: one word of Philox-4x32 of a seed and four counters
that are data (``schemas/philox.py`` defines it; replay computes it). The Triton front end
calls it where ``tl.rand``, ``tl.randint4x``, ``tl.philox`` ... meet a loaded seed or
loaded offsets (``triton/random.py``); concrete ones never get here.

Timing (ADR-0860): a Philox-4x32 round is ``ROUND_OPS`` lane operations per element, two
32x32 multiplies each giving a high and a low half and four XORs, on the MATH engine (the
key bumps are per program, the seed being a scalar). The four words of one evaluation come
out of the same rounds: the first word's row carries ``n_rounds * ROUND_OPS`` operations per
element, each other word's row one (moving the word out), as an elementwise op costs.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import DtypeError
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering.emit import attrs_json, emit, prod
from kernbench.record.lowering.operands import arguments
from kernbench.record.machine.context import current
from kernbench.record.source import src_here
from kernbench.schemas import dtypes, rules
from kernbench.schemas.ops import OP

__all__ = ["ROUND_OPS", "word"]

#: lane operations per element of one Philox-4x32 round (module doc)
ROUND_OPS = 8


def word(args: tuple[Any, ...], n_rounds: int, k: int, priced: bool = True) -> TensorHandle:
    """Word ``k`` of Philox-4x32-``n_rounds`` of ``(seed, c0, c1, c2, c3)`` (handles or
    Python integers), a uint32 block of their broadcast shape. ``priced``: this row carries
    the rounds' work (module doc)."""
    ctx = current()
    src = src_here()
    handles, scalars, _ = arguments(OP.PHILOX, args, src)
    attrs = {"n_rounds": n_rounds, "word": k, "scalars": [list(s) for s in scalars]}
    try:
        got = rules.infer(OP.PHILOX, [h.shape for h in handles], [h.dtype for h in handles],
                          attrs)
    except ValueError as exc:
        raise DtypeError(str(exc), src) from None
    assert got is not None, "the philox family infers its output"
    shape = got[0]
    n = prod(shape)
    work = max(n * ROUND_OPS * n_rounds, n) if priced else n
    text = (attrs_json(n_rounds=n_rounds, scalars=scalars, word=k) if scalars
            else attrs_json(n_rounds=n_rounds, word=k))
    return emit(ctx, OP.PHILOX, handles, shape, dtypes.uint32, (work,), src, text)
