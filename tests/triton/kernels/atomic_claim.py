"""``tl.atomic_cas`` across programs (issue 29): every program tries to claim each slot
that is still 0 (``old = atomic_cas(slot, 0, pid + 1)``: scalar compare and value), and
advances a float ticket chain by one where it holds the ticket it loaded (compare and value
from TCM). Each program stores the old values it got back."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch

BLOCK = 8
PROGRAMS = 4


@triton.jit
def claim_kernel(slots_ptr, chain_ptr, want_ptr, got_ptr, seen_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = tl.arange(0, BLOCK)
    old = tl.atomic_cas(slots_ptr + idx, 0, pid + 1)
    tl.store(got_ptr + pid * BLOCK + idx, old)
    want = tl.load(want_ptr + pid * BLOCK + idx)
    seen = tl.atomic_cas(chain_ptr + idx, want, want + 1.0)
    tl.store(seen_ptr + pid * BLOCK + idx, seen)


def inputs(seed: int = 0) -> tuple[np.ndarray, ...]:
    """Slots partly taken already (values 7 and 3), a chain at 0 and each program's wanted
    ticket (0..3: a program advances a slot only when it finds its ticket there)."""
    slots = np.zeros(BLOCK, np.int32)
    slots[[1, 4]] = [7, 3]
    want = np.random.default_rng(seed).integers(0, PROGRAMS, (PROGRAMS, BLOCK))
    return (slots, np.zeros(BLOCK, np.float32), want.astype(np.float32),
            np.zeros((PROGRAMS, BLOCK), np.int32), np.full((PROGRAMS, BLOCK), -1.0, np.float32))


def simulate(claims: list[int], chains: list[int], slots_ptr: np.ndarray,
             chain_ptr: np.ndarray, want_ptr: np.ndarray, **_: np.ndarray
             ) -> dict[str, np.ndarray]:
    """numpy reference: the programs' compare-and-swaps one after the other, on the slots in
    the program order ``claims``, on the chain in ``chains``."""
    slots, chain, want = slots_ptr.copy(), chain_ptr.copy(), want_ptr.reshape(PROGRAMS, BLOCK)
    got = np.zeros((PROGRAMS, BLOCK), np.int32)
    seen = np.zeros((PROGRAMS, BLOCK), np.float32)
    for pid in claims:
        got[pid] = slots
        slots = np.where(slots == 0, np.int32(pid + 1), slots)
    for pid in chains:
        seen[pid] = chain
        chain = np.where(chain == want[pid], want[pid] + 1, chain).astype(np.float32)
    return {"slots_ptr": slots, "chain_ptr": chain, "got_ptr": got.reshape(-1),
            "seen_ptr": seen.reshape(-1)}


def launch(claims: list[int] | None = None, chains: list[int] | None = None,
           seed: int = 0) -> Launch:
    """The launch; its reference applies the programs in the orders given (default 0..P-1,
    the interpreter's order)."""
    def reference(**arrays: np.ndarray) -> dict[str, np.ndarray]:
        every = list(range(PROGRAMS))
        return simulate(every if claims is None else claims,
                        every if chains is None else chains, **arrays)

    slots, chain, want, got, seen = inputs(seed)
    return Launch("triton-atomic-claim", claim_kernel, (PROGRAMS,),
                  (slots, chain, want.reshape(-1), got.reshape(-1), seen.reshape(-1)),
                  {"BLOCK": BLOCK}, reference)


def case(claims: list[int] | None = None, chains: list[int] | None = None, seed: int = 0):
    return launch(claims, chains, seed).case()
