"""Triton's random numbers: the tutorial's low-memory dropout (tutorial 04; the keep mask
is ``tl.rand`` of a seed and the element offsets, so no mask is ever stored; ragged tail
masked), and ``randn``/``randint``/``rand`` with a 64-bit seed and 64-bit counters, against
a plain-Python Philox-4x32-10."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def seeded_dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def philox_words(seed: int, lo: int, hi: int = 0) -> list[int]:
    """Philox-4x32-10 at counter ``(lo, hi, 0, 0)``: its four output words, one element in
    plain Python integers (independent of kernbench's vectorised one)."""
    c = [lo & 0xFFFFFFFF, hi & 0xFFFFFFFF, 0, 0]
    k = [seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF]
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1],
             p0 & 0xFFFFFFFF]
        k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return c


def uniform(word: int) -> np.float32:
    i = word - (1 << 32) if word >= 1 << 31 else word
    i = -i - 1 if i < 0 else i
    return np.float32(i) * np.float32(4.6566127342e-10)


def reference(x_ptr: np.ndarray, seed: int, p: float) -> np.ndarray:
    keep = np.array([uniform(philox_words(seed, i)[0]) > np.float32(p)
                     for i in range(x_ptr.size)])
    return np.where(keep, x_ptr / np.float32(1 - p), np.float32(0)).astype(np.float32)


def launch(n: int = 1000, p: float = 0.5, seed: int = 123, block: int = 256) -> Launch:
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    out = np.zeros_like(x)
    return Launch("triton-dropout", seeded_dropout_kernel,
                  lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),), (x, out, n, p, seed),
                  {"BLOCK_SIZE": block},
                  lambda x_ptr, **_: {"output_ptr": reference(x_ptr, seed, p)})


def case(n: int = 1000, p: float = 0.5, seed: int = 123, block: int = 256):
    return launch(n, p, seed, block).case()


@triton.jit
def random_kernel(n_ptr, i_ptr, u_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(n_ptr + offs, tl.randn(seed, offs))
    tl.store(i_ptr + offs, tl.randint(seed, offs).to(tl.int32, bitcast=True))
    tl.store(u_ptr + offs, tl.rand(seed, offs.to(tl.int64) * 3_000_000_000))  # 64-bit counters


def _random_reference(n: int, seed: int) -> dict[str, np.ndarray]:
    f = np.float32
    words = [philox_words(seed, i) for i in range(n)]
    u1 = np.maximum(f(1e-7), np.array([uniform(w[0]) for w in words], f))
    u2 = np.array([uniform(w[1]) for w in words], f)
    normal = np.sqrt(f(-2.0) * np.log(u1)) * np.cos(f(6.283185307179586) * u2)
    wide = [philox_words(seed, i * 3_000_000_000, (i * 3_000_000_000) >> 32)[0]
            for i in range(n)]
    return {"n_ptr": normal.astype(f),
            "i_ptr": np.array([w[0] for w in words], np.uint32).view(np.int32),
            "u_ptr": np.array([uniform(w) for w in wide], f)}


def random_launch(n: int = 128, seed: int = 2**40 + 7, block: int = 64) -> Launch:
    outs = (np.zeros(n, np.float32), np.zeros(n, np.int32), np.zeros(n, np.float32))
    return Launch("triton-random", random_kernel, (n // block,), (*outs, seed),
                  {"BLOCK": block}, lambda **_: _random_reference(n, seed))


def random_case(n: int = 128, seed: int = 2**40 + 7, block: int = 64):
    return random_launch(n, seed, block).case()
