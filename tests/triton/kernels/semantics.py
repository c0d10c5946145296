"""Small kernels that pin down Triton's semantics where a numpy reimplementation could drift:
C-style integer ``//`` and ``%`` (truncation toward zero, the remainder takes the dividend's
sign) on loaded data and on index arithmetic, dtype promotion of mixed operands (python
scalars are weakly typed), accumulator types of reductions, ``other`` of masked loads and
masked stores (masked-off elements keep what memory held). The references are closed forms
of Triton's documented rules; the differential test holds them against Triton's interpreter.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def divmod_kernel(x_ptr, y_ptr, out_ptr, idx_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + 0 * BLOCK + offs, x // y)
    tl.store(out_ptr + 1 * BLOCK + offs, x % y)
    tl.store(out_ptr + 2 * BLOCK + offs, x // 3)
    tl.store(out_ptr + 3 * BLOCK + offs, x % -3)
    a = offs - BLOCK // 2  # index arithmetic: known before any data is loaded
    tl.store(idx_ptr + 0 * BLOCK + offs, a // 3)
    tl.store(idx_ptr + 1 * BLOCK + offs, a % 3)
    tl.store(idx_ptr + 2 * BLOCK + offs, a // -4)
    tl.store(idx_ptr + 3 * BLOCK + offs, a % -4)


def _cdiv(x: np.ndarray, y: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """C's quotient and remainder: truncate toward zero; x == q * y + r."""
    x64, y64 = np.asarray(x, np.int64), np.asarray(y, np.int64)
    q = np.sign(x64) * np.sign(y64) * (np.abs(x64) // np.abs(y64))
    return q.astype(np.int32), (x64 - q * y64).astype(np.int32)


def divmod_launch(block: int = 32, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, block, dtype=np.int32)
    y = rng.choice(np.array([-7, -3, -2, -1, 1, 2, 3, 7], np.int32), block)
    out = np.zeros((4, block), np.int32)
    idx = np.zeros((4, block), np.int32)

    def reference(x_ptr: np.ndarray, y_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        a = np.arange(block, dtype=np.int32) - block // 2
        return {"out_ptr": np.stack([*_cdiv(x_ptr, y_ptr), _cdiv(x_ptr, 3)[0],
                                     _cdiv(x_ptr, -3)[1]]),
                "idx_ptr": np.stack([*_cdiv(a, 3), *_cdiv(a, -4)])}

    return Launch("triton-divmod", divmod_kernel, (1,), (x, y, out, idx), {"BLOCK": block},
                  reference)


@triton.jit
def promote_kernel(h_ptr, f_ptr, i_ptr, j_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    h = tl.load(h_ptr + offs)  # float16
    f = tl.load(f_ptr + offs)  # float32
    i = tl.load(i_ptr + offs)  # int32
    j = tl.load(j_ptr + offs)  # int32, nonzero
    b = tl.load(b_ptr + offs)  # int8
    tl.store(out_ptr + 0 * BLOCK + offs, h + 0.0001)  # fp16 + python float -> fp16
    tl.store(out_ptr + 1 * BLOCK + offs, h + f)       # fp16 + fp32 -> fp32
    tl.store(out_ptr + 2 * BLOCK + offs, i * 1.5)     # int32 * python float -> fp32
    tl.store(out_ptr + 3 * BLOCK + offs, i / j)       # int / int -> fp32 true division
    tl.store(out_ptr + 4 * BLOCK + offs, b + b)       # int8 + int8 -> int8 (wraps)
    tl.store(out_ptr + 5 * BLOCK + offs, b + i)       # int8 + int32 -> int32
    tl.store(out_ptr + 6 * BLOCK + offs, h + i)       # fp16 + int32 -> fp16
    tl.store(out_ptr + 7 * BLOCK + offs, (h * 3).to(tl.int32))  # fp -> int truncates


def promote_launch(block: int = 32, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    h = (rng.integers(-4, 5, block) * 0.75).astype(np.float16)
    f = rng.standard_normal(block, dtype=np.float32) * np.float32(1e-3)
    i = rng.integers(2040, 2060, block, dtype=np.int32) * rng.choice([-1, 1], block).astype(
        np.int32)
    j = rng.choice(np.array([-7, -3, 3, 7], np.int32), block)
    b = rng.integers(60, 128, block, dtype=np.int8)
    out = np.zeros((8, block), np.float32)

    def reference(h_ptr: np.ndarray, f_ptr: np.ndarray, i_ptr: np.ndarray, j_ptr: np.ndarray,
                  b_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        rows = [h_ptr + np.float16(0.0001), h_ptr.astype(np.float32) + f_ptr,
                i_ptr.astype(np.float32) * np.float32(1.5),
                i_ptr.astype(np.float32) / j_ptr.astype(np.float32),
                (b_ptr.astype(np.int32) * 2).astype(np.int8),
                b_ptr.astype(np.int32) + i_ptr,
                h_ptr + i_ptr.astype(np.float16),
                np.trunc(h_ptr * np.float16(3))]
        return {"out_ptr": np.stack([r.astype(np.float32) for r in rows])}

    return Launch("triton-promote", promote_kernel, (1,), (h, f, i, j, b, out),
                  {"BLOCK": block}, reference)


@triton.jit
def reduce_kernel(h_ptr, b_ptr, x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    h = tl.load(h_ptr + offs)  # float16, the total overflows float16
    b = tl.load(b_ptr + offs)  # int8, the total overflows int8
    x = tl.load(x_ptr + offs)  # float32 with ties for the maximum
    tl.store(out_ptr + 0, tl.sum(h, axis=0))  # fp16 sum returns fp16: inf
    tl.store(out_ptr + 1, tl.sum(b, axis=0))  # int8 sums in int32
    tl.store(out_ptr + 2, tl.max(b, axis=0))
    tl.store(out_ptr + 3, tl.argmax(x, axis=0))  # first index of the maximum
    tl.store(out_ptr + 4, tl.argmin(x, axis=0))
    tl.store(out_ptr + 5, tl.sum(x > 0, axis=0))  # a boolean sums as a count


def reduce_launch(block: int = 64, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    h = np.full(block, 2000.0, np.float16)
    b = rng.integers(90, 120, block, dtype=np.int8)
    x = rng.integers(-3, 4, block).astype(np.float32)
    out = np.zeros(6, np.float32)

    def reference(h_ptr: np.ndarray, b_ptr: np.ndarray, x_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        with np.errstate(over="ignore"):
            hsum = np.float16(h_ptr.astype(np.float32).sum())
        return {"out_ptr": np.array([hsum, b_ptr.astype(np.int32).sum(), b_ptr.max(),
                                     np.argmax(x_ptr), np.argmin(x_ptr), (x_ptr > 0).sum()],
                                    np.float32)}

    return Launch("triton-reduce", reduce_kernel, (1,), (h, b, x, out), {"BLOCK": block},
                  reference)


@triton.jit
def masked_kernel(x_ptr, i_ptr, full_ptr, ifull_ptr, part_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    inside = offs < n
    tl.store(full_ptr + offs, tl.load(x_ptr + offs, mask=inside, other=-1.5))
    tl.store(ifull_ptr + offs, tl.load(i_ptr + offs, mask=inside, other=-7))
    odd = (offs % 2) == 1
    x = tl.load(x_ptr + offs, mask=odd & inside)  # masked-off lanes: never observed
    tl.store(part_ptr + offs, x * 2, mask=odd & inside)


def masked_launch(n: int = 21, block: int = 32, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(block, dtype=np.float32)
    i = rng.integers(-100, 100, block, dtype=np.int32)
    full = np.zeros(block, np.float32)
    ifull = np.zeros(block, np.int32)
    part = np.full(block, 7.0, np.float32)

    def reference(x_ptr: np.ndarray, i_ptr: np.ndarray, part_ptr: np.ndarray,
                  **_: np.ndarray) -> dict[str, np.ndarray]:
        inside = np.arange(block) < n
        keep = inside & (np.arange(block) % 2 == 1)
        return {"full_ptr": np.where(inside, x_ptr, np.float32(-1.5)),
                "ifull_ptr": np.where(inside, i_ptr, np.int32(-7)),
                "part_ptr": np.where(keep, x_ptr * 2, part_ptr)}

    return Launch("triton-masked", masked_kernel, (1,), (x, i, full, ifull, part, n),
                  {"BLOCK": block}, reference)


def divmod_case(block: int = 32, seed: int = 0):
    return divmod_launch(block, seed).case()


def promote_case(block: int = 32, seed: int = 0):
    return promote_launch(block, seed).case()


def reduce_case(block: int = 64, seed: int = 0):
    return reduce_launch(block, seed).case()


def masked_case(n: int = 21, block: int = 32, seed: int = 0):
    return masked_launch(n, block, seed).case()
