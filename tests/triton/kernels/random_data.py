"""Triton's random numbers where the seed or the offsets are data (issue 38), in the styles
of the public kernels that do it: the low-memory dropout tutorial with its seed in memory
(``seed = tl.load(seed_ptr)``), a serving engine's per-request seeded uniforms (int64 seeds
loaded per row, a second axis xor-ed in, ``tl.rand4x``), a fused dropout's ``randint4x``
mask against an integer threshold, counters taken from loaded indices (32- and 64-bit,
``n_rounds``), ``tl.philox`` itself on data counters, ``randn``/``randn4x``, torch.compile's
``tl.rand(seed, index.to(tl.uint32))`` of a loaded int64 seed and a block of per-row seeds.
The references are a plain-Python Philox-4x32 (``tests/replay/oracle.py``), one element at a
time, independent of kernbench's vectorised one.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.replay.oracle import philox_ref
from tests.triton.kernels.spec import Launch

F = np.float32


def words(seed: int | np.ndarray, lo: np.ndarray, hi: np.ndarray | int = 0, c2: int = 0,
          c3: int = 0, rounds: int = 10) -> np.ndarray:
    """The four words at counters (lo, hi, c2, c3), elementwise: shape (4, *lo.shape)."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, np.int64), np.asarray(hi, np.int64))
    seeds = np.broadcast_to(np.asarray(seed, np.int64), lo.shape)
    out = [philox_ref(int(s), (int(a), int(b), c2, c3), rounds)
           for s, a, b in zip(seeds.ravel(), lo.ravel(), hi.ravel(), strict=True)]
    return np.array(out, np.uint32).T.reshape((4, *lo.shape))


def uniform(w: np.ndarray) -> np.ndarray:
    i = w.astype(np.uint32).view(np.int32)
    return np.where(i < 0, -(i.astype(np.int64)) - 1, i).astype(F) * F(4.6566127342e-10)


def normal(u1: np.ndarray, u2: np.ndarray, second: bool = False) -> np.ndarray:
    r = np.sqrt(F(-2.0) * np.log(np.maximum(F(1e-7), u1)))
    th = F(6.283185307179586) * u2
    return (r * (np.sin(th) if second else np.cos(th))).astype(F)


# -- the tutorial's dropout, its seed in memory ---------------------------------------------
@triton.jit
def dropout_seed_in_memory(x_ptr, out_ptr, seed_ptr, n_elements, p, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    seed = tl.load(seed_ptr)
    keep = tl.rand(seed, offsets) > p
    tl.store(out_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def dropout_launch(n: int = 300, p: float = 0.4, seed: int = 1234, block: int = 128) -> Launch:
    x = np.random.default_rng(0).standard_normal(n, dtype=F)

    def reference(x_ptr: np.ndarray, seed_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        keep = uniform(words(int(seed_ptr[0]), np.arange(n))[0]) > F(p)
        return {"out_ptr": np.where(keep, x_ptr / F(1 - p), F(0)).astype(F)}

    return Launch("triton-dropout-seed-loaded", dropout_seed_in_memory,
                  lambda meta: (triton.cdiv(n, meta["BLOCK"]),),
                  (x, np.zeros(n, F), np.array([seed], np.int32), n, p), {"BLOCK": block},
                  reference)


def dropout_case(**kw: object):
    return dropout_launch(**kw).case()  # type: ignore[arg-type]


# -- per-row int64 seeds, a second axis xor-ed in, rand4x ------------------------------------
@triton.jit
def seeded_uniform_rows(out_ptr, seed_ptr, row_stride, slice_stride, n_cols,
                        BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    part = tl.program_id(axis=1)
    offs = tl.arange(0, BLOCK)
    seed = tl.load(seed_ptr + row)
    if part > 0:
        seed ^= part
    u1, u2, u3, u4 = tl.rand4x(seed, offs)
    base = out_ptr + row * row_stride + part * slice_stride
    tl.store(base + offs, u1, mask=offs < n_cols)
    tl.store(base + BLOCK + offs, u2, mask=BLOCK + offs < n_cols)
    tl.store(base + 2 * BLOCK + offs, u3, mask=2 * BLOCK + offs < n_cols)
    tl.store(base + 3 * BLOCK + offs, u4, mask=3 * BLOCK + offs < n_cols)


ROW_SEEDS = (7, -3, 2**40 + 11)  # an int64 seed's high word is the key's second word


def rows_launch(n_cols: int = 56, block: int = 16, parts: int = 2) -> Launch:
    seeds = np.array(ROW_SEEDS, np.int64)
    out = np.zeros((len(seeds), parts, n_cols), F)

    def reference(seed_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        want = np.zeros_like(out)
        for r, s in enumerate(seed_ptr.tolist()):
            for k in range(parts):
                u = uniform(words(s ^ k, np.arange(block))).reshape(-1)
                want[r, k] = u[:n_cols]
        return {"out_ptr": want}

    return Launch("triton-rand4x-row-seeds", seeded_uniform_rows, (len(seeds), parts),
                  (out, seeds, parts * n_cols, n_cols, n_cols), {"BLOCK": block}, reference)


def rows_case(**kw: object):
    return rows_launch(**kw).case()  # type: ignore[arg-type]


# -- counters from loaded data: randint4x of loaded indices, n_rounds, 64-bit offsets ---------
@triton.jit
def loaded_counters(idx_ptr, wide_ptr, w_ptr, r_ptr, keep_ptr, seed, p,
                    BLOCK: tl.constexpr, ROUNDS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs)
    r0, r1, r2, r3 = tl.randint4x(seed, idx * 3 + 1, n_rounds=ROUNDS)
    tl.store(w_ptr + offs, r0.to(tl.int32, bitcast=True))
    tl.store(w_ptr + BLOCK + offs, r1.to(tl.int32, bitcast=True))
    tl.store(w_ptr + 2 * BLOCK + offs, r2.to(tl.int32, bitcast=True))
    tl.store(w_ptr + 3 * BLOCK + offs, r3.to(tl.int32, bitcast=True))
    wide = tl.load(wide_ptr + offs)  # int64 offsets: the high word is the second counter
    tl.store(r_ptr + offs, tl.randint(seed, wide).to(tl.int32, bitcast=True))
    threshold = tl.cast(4294967296.0 * p, tl.int32)  # a fused dropout's integer threshold
    tl.store(keep_ptr + offs, (r0 > threshold).to(tl.int8))


def counters_launch(block: int = 32, seed: int = 99, rounds: int = 7, p: float = 0.3
                    ) -> Launch:
    rng = np.random.default_rng(4)
    idx = rng.integers(0, 10_000, block, dtype=np.int32)
    wide = rng.integers(-(2**62), 2**62, block, dtype=np.int64)
    outs = (np.zeros(4 * block, np.int32), np.zeros(block, np.int32), np.zeros(block, np.int8))

    def reference(idx_ptr: np.ndarray, wide_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        w = words(seed, idx_ptr.astype(np.int64) * 3 + 1, rounds=rounds)
        wide_u = wide_ptr.view(np.uint64)
        r = words(seed, (wide_u & np.uint64(0xFFFFFFFF)).astype(np.int64),
                  (wide_u >> np.uint64(32)).astype(np.int64))[0]
        threshold = np.uint32(int(F(4294967296.0) * F(p)))
        return {"w_ptr": w.reshape(-1).view(np.int32), "r_ptr": r.view(np.int32),
                "keep_ptr": (w[0] > threshold).astype(np.int8)}

    return Launch("triton-randint4x-loaded-counters", loaded_counters, (1,),
                  (idx, wide, *outs, seed, p), {"BLOCK": block, "ROUNDS": rounds}, reference)


def counters_case(**kw: object):
    return counters_launch(**kw).case()  # type: ignore[arg-type]


# -- tl.philox on data counters, randn / randn4x, a block of per-row seeds --------------------
@triton.jit
def philox_normals(seed_ptr, c_ptr, row_seed_ptr, w_ptr, n_ptr, b_ptr,
                   BLOCK: tl.constexpr, ROWS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    seed = tl.load(seed_ptr)  # int64
    c = tl.load(c_ptr + offs)
    a, b, cc, d = tl.philox(seed, c, offs, 0, c ^ 5, n_rounds=5)
    tl.store(w_ptr + offs, a.to(tl.int32, bitcast=True))
    tl.store(w_ptr + BLOCK + offs, b.to(tl.int32, bitcast=True))
    tl.store(w_ptr + 2 * BLOCK + offs, cc.to(tl.int32, bitcast=True))
    tl.store(w_ptr + 3 * BLOCK + offs, d.to(tl.int32, bitcast=True))
    tl.store(n_ptr + offs, tl.randn(seed, offs))
    n1, n2, n3, n4 = tl.randn4x(seed, c)
    tl.store(n_ptr + BLOCK + offs, n1)
    tl.store(n_ptr + 2 * BLOCK + offs, n2)
    tl.store(n_ptr + 3 * BLOCK + offs, n3)
    tl.store(n_ptr + 4 * BLOCK + offs, n4)
    tl.store(n_ptr + 5 * BLOCK + offs, tl.rand(seed, offs.to(tl.uint32)))  # torch.compile's
    rows = tl.arange(0, ROWS)
    seeds = tl.load(row_seed_ptr + rows)[:, None]  # one seed per row, broadcast
    bits = tl.randint(seeds, rows[:, None] * BLOCK + offs[None, :])
    tl.store(b_ptr + rows[:, None] * BLOCK + offs[None, :], bits.to(tl.int32, bitcast=True))


def philox_launch(block: int = 16, rows: int = 4, seed: int = -(2**35) - 9) -> Launch:
    rng = np.random.default_rng(5)
    c = rng.integers(-(2**31), 2**31 - 1, block, dtype=np.int32)
    row_seeds = rng.integers(-(2**31), 2**31 - 1, rows, dtype=np.int32)
    outs = (np.zeros(4 * block, np.int32), np.zeros(6 * block, F),
            np.zeros(rows * block, np.int32))

    def reference(seed_ptr: np.ndarray, c_ptr: np.ndarray, row_seed_ptr: np.ndarray,
                  **_: np.ndarray) -> dict[str, np.ndarray]:
        s = int(seed_ptr[0])
        offs = np.arange(block)
        cs = c_ptr.view(np.uint32).astype(np.int64)
        w = np.stack([np.array(philox_ref(s, (int(a), int(o), 0, int(a) ^ 5), 5), np.uint32)
                      for a, o in zip(cs.tolist(), offs.tolist(), strict=True)], axis=1)
        plain = words(s, offs)
        u = uniform(words(s, cs))
        normals = [normal(uniform(plain[0]), uniform(plain[1])),
                   normal(u[0], u[1]), normal(u[0], u[1], True),
                   normal(u[2], u[3]), normal(u[2], u[3], True), uniform(plain[0])]
        grid = np.arange(rows)[:, None] * block + offs[None, :]
        bits = words(row_seed_ptr.astype(np.int64)[:, None], grid)[0]
        return {"w_ptr": w.reshape(-1).view(np.int32), "n_ptr": np.concatenate(normals),
                "b_ptr": bits.reshape(-1).view(np.int32)}

    return Launch("triton-philox-normals-block-seeds", philox_normals, (1,),
                  (np.array([seed], np.int64), c, row_seeds, *outs),
                  {"BLOCK": block, "ROWS": rows}, reference)


def philox_case(**kw: object):
    return philox_launch(**kw).case()  # type: ignore[arg-type]
