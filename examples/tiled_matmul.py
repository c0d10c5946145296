"""A user's own kernel: tiled bf16 matmul with a bias + ReLU epilogue, outside the package.

Everything kernbench needs is in this one module: the kernel, a case factory (``case``) the
CLI can record and replay by name, and a test the kernbench pytest plugin runs:

    export PYTHONPATH=examples
    kernbench record tiled_matmul:case -p N=1024 -o mm.ktrace
    kernbench replay mm.ktrace --case tiled_matmul:case
    kernbench plot mm.ktrace -o mm.png
    pytest examples/tiled_matmul.py                      # check, replay, no regression
    pytest examples/tiled_matmul.py --kb-update-goldens  # accept a new golden
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import kernbench as kb
from kernbench import tl

GOLDEN = Path(__file__).with_name("goldens") / "tiled_matmul.ktrace"


@kb.kernel
def matmul_bias_relu(a, bt, bias, c, *, N: int, K: int, BM: int, BN: int):  # noqa: N803
    """C = relu(A @ B + bias). A is [M, K]; B is stored transposed as Bt [N, K] so a BN-row
    block of it is one contiguous load; C is written blocked [M/BM, N/BN, BM, BN] so every
    tile store is contiguous too."""
    i = tl.program_id(0)  # one program per BM-row block of A
    tiles = N // BN
    a_blk = tl.load(a + i * BM * K, (BM, K), tl.bfloat16)
    w_next = tl.load(bt, (BN, K), tl.bfloat16)
    for j in range(tiles):
        w = w_next
        if j + 1 < tiles:  # prefetch the next Bt block while this one is multiplied
            w_next = tl.load(bt + (j + 1) * BN * K, (BN, K), tl.bfloat16)
        with tl.scratch_scope():
            acc = tl.dot(a_blk, tl.trans(w))  # [BM, BN] float32
            b = tl.load(bias + j * BN, (1, BN), tl.float32)
            tl.store(c + (i * tiles + j) * BM * BN, tl.maximum(acc + b, 0.0))


def case(M: int = 256, N: int = 512, K: int = 256, BM: int = 128, BN: int = 128) -> kb.Case:  # noqa: N803
    """The case kernbench records: shapes and tiles are parameters (``-p N=1024``)."""
    if M % BM or N % BN:
        raise ValueError(f"M={M}, N={N} must be multiples of BM={BM}, BN={BN}")

    def reference(a, bt, bias):
        y = np.maximum(a.astype(np.float32) @ bt.astype(np.float32).T + bias, 0.0)
        return {"c": y.reshape(M // BM, BM, N // BN, BN).transpose(0, 2, 1, 3)}

    return kb.Case(
        name="tiled-matmul", kernel=matmul_bias_relu, grid=(M // BM,),
        tensors={"a": kb.tensor((M, K), "bfloat16", init=kb.randn(seed=1)),
                 "bt": kb.tensor((N, K), "bfloat16", init=kb.randn(seed=2)),
                 "bias": kb.tensor((N,), "float32", init=kb.randn(seed=3)),
                 "c": kb.tensor((M // BM, N // BN, BM, BN), "float32", role="output")},
        params={"N": N, "K": K, "BM": BM, "BN": BN},
        reference=reference,
    )


def test_tiled_matmul(kb_record):
    """Run by ``pytest examples/tiled_matmul.py`` (the kernbench plugin gives kb_record)."""
    from kernbench.testing import assert_check_ok, assert_no_regression, assert_replay_ok

    trace = kb_record(case)
    assert_check_ok(trace)  # invariants: no engine overlap, no data hazard, scratch budget
    assert_replay_ok(trace, case=case)  # real numbers match the numpy reference
    assert_no_regression(GOLDEN, trace, latency="+1%", dma_read_bytes="+0%")
