"""Starter cases: scale-exp (the README example), tiled GEMM, row softmax.

Their numpy references live in kernbench/case/references.py (docs/adr/0005-isolated-replay.md)."""

from __future__ import annotations

import kernbench as kb
from kernbench import tl
from kernbench.case import references


@kb.kernel
def scale_exp(x, y, *, n: int, tile: int):
    pid = tl.program_id(0)
    for j in range(n // tile):
        with tl.scratch_scope():
            a = tl.load(x + pid * n + j * tile, (tile,), tl.float32)
            tl.store(y + pid * n + j * tile, tl.exp(a * 0.5))


@kb.register_case("scale-exp")
def scale_exp_case(rows: int = 2, n: int = 4096, tile: int = 512) -> kb.Case:
    """exp(x / 2) over ``rows`` rows of ``n`` float32, one program per row, ``tile`` at a time."""
    return kb.Case(
        name="scale-exp", kernel=scale_exp, grid=(rows,),
        tensors={"x": kb.tensor((rows, n), "float32", init=kb.randn(seed=0)),
                 "y": kb.tensor((rows, n), "float32", role="output")},
        params={"n": n, "tile": tile},
        reference=references.scale_exp(),
    )


@kb.kernel
def gemm(a, bt, c, *, M: int, N: int, K: int, BM: int, BN: int):  # noqa: N803
    """C = A @ B with A [M, K], B stored transposed as Bt [N, K] (the "NT" layout), and C
    written in a blocked layout [M/BM, N/BN, BM, BN] so every tile store is contiguous."""
    i = tl.program_id(0)
    tiles_n = N // BN
    a_blk = tl.load(a + i * BM * K, (BM, K), tl.bfloat16)
    b_next = tl.load(bt, (BN, K), tl.bfloat16)
    for j in range(tiles_n):
        b_cur = b_next
        if j + 1 < tiles_n:  # prefetch the next Bt block while this one is multiplied
            b_next = tl.load(bt + (j + 1) * BN * K, (BN, K), tl.bfloat16)
        c_tile = tl.dot(a_blk, tl.trans(b_cur))
        tl.store(c + (i * tiles_n + j) * BM * BN, c_tile)


@kb.register_case("gemm")
def gemm_case(M: int = 256, N: int = 512, K: int = 256, BM: int = 128,  # noqa: N803
              BN: int = 128) -> kb.Case:
    """Tiled bf16 GEMM with float32 output, one program per BM-row block."""
    for name, full, blk in (("M", M, BM), ("N", N, BN)):
        if full % blk:
            raise kb.BadInputError(f"gemm: {name}={full} is not a multiple of its block {blk}")

    # the expected C in its blocked layout; replay takes the same function from
    # kernbench.case.references by the case name, without importing this module
    reference = references.gemm(M=M, N=N, BM=BM, BN=BN)

    return kb.Case(
        name="gemm", kernel=gemm, grid=(M // BM,),
        tensors={"a": kb.tensor((M, K), "bfloat16", init=kb.randn(seed=1)),
                 "bt": kb.tensor((N, K), "bfloat16", init=kb.randn(seed=2)),
                 "c": kb.tensor((M // BM, N // BN, BM, BN), "float32", role="output")},
        params={"M": M, "N": N, "K": K, "BM": BM, "BN": BN},
        reference=reference,
    )


@kb.kernel
def row_softmax(x, y, *, rows_per_program: int, n: int):
    pid = tl.program_id(0)
    for r in range(rows_per_program):
        with tl.scratch_scope():
            off = (pid * rows_per_program + r) * n
            row = tl.load(x + off, (1, n), tl.float32)
            tl.store(y + off, tl.softmax(row, axis=-1))


@kb.register_case("softmax")
def softmax_case(rows: int = 64, n: int = 1024, programs: int = 8) -> kb.Case:
    """Row softmax of a [rows, n] float32 matrix; ``programs`` programs share the rows."""
    if rows % programs:
        raise kb.BadInputError(f"softmax: rows={rows} is not a multiple of programs={programs}")

    # row softmax in float32; replay takes the same function from kernbench.case.references
    # by the case name, without importing this module
    reference = references.softmax()

    return kb.Case(
        name="softmax", kernel=row_softmax, grid=(programs,),
        tensors={"x": kb.tensor((rows, n), "float32", init=kb.randn(seed=3)),
                 "y": kb.tensor((rows, n), "float32", role="output")},
        params={"rows_per_program": rows // programs, "n": n},
        reference=reference,
    )


@kb.kernel
def small_ops(x, y, *, iters: int, width: int):
    acc = tl.load(x, (width,), tl.float32)
    for _ in range(iters):
        with tl.scratch_scope():
            t = acc * 0.5
            t = t + acc
            tl.copy_to(acc, tl.exp(t * -0.25))
    tl.store(y, acc)


@kb.register_case("small-ops")
def small_ops_case(iters: int = 1000, width: int = 16) -> kb.Case:
    """A long chain of tiny MATH ops (the recorder's and replayer's throughput benchmark)."""

    return kb.Case(
        name="small-ops", kernel=small_ops, grid=(1,),
        tensors={"x": kb.tensor((width,), "float32", init=kb.randn(seed=4)),
                 "y": kb.tensor((width,), "float32", role="output")},
        params={"iters": iters, "width": width},
        reference=references.small_ops(iters=iters),
    )
