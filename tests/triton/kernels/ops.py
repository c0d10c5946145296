"""The issue's op list on loaded data, three kernels: elementwise math, reductions over
each axis, and layout / creation / casts / dot / atomics. (libdevice calls are covered by
test_front_end_rebind against numpy: Triton's interpreter, the differential oracle here,
returns None for them.) Each output row is one op, so a
wrong op names itself in the comparison with numpy and with Triton's interpreter."""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch

#: elementwise_kernel's output rows, in order
UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "cos", "erf", "abs",
         "maximum", "minimum", "clamp", "fma", "where", "neg")


@triton.jit
def elementwise_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = tl.load(y_ptr + offs, mask=mask, other=1.0)
    pos = tl.abs(x) + 0.5
    row = out_ptr + offs
    tl.store(row + 0 * n, tl.exp(x), mask=mask)
    tl.store(row + 1 * n, tl.exp2(x), mask=mask)
    tl.store(row + 2 * n, tl.log(pos), mask=mask)
    tl.store(row + 3 * n, tl.log2(pos), mask=mask)
    tl.store(row + 4 * n, tl.sqrt(pos), mask=mask)
    tl.store(row + 5 * n, tl.rsqrt(pos), mask=mask)
    tl.store(row + 6 * n, tl.sigmoid(x), mask=mask)
    tl.store(row + 7 * n, tl.cos(x), mask=mask)
    tl.store(row + 8 * n, tl.erf(x), mask=mask)
    tl.store(row + 9 * n, tl.abs(x), mask=mask)
    tl.store(row + 10 * n, tl.maximum(x, y), mask=mask)
    tl.store(row + 11 * n, tl.minimum(x, y), mask=mask)
    tl.store(row + 12 * n, tl.clamp(x, -0.5, 0.5), mask=mask)
    tl.store(row + 13 * n, tl.fma(x, y, pos), mask=mask)
    tl.store(row + 14 * n, tl.where(x > y, x, y), mask=mask)
    tl.store(row + 15 * n, -x, mask=mask)


def _unary_reference(x_ptr: np.ndarray, y_ptr: np.ndarray, **_: np.ndarray
                     ) -> dict[str, np.ndarray]:
    x, y = x_ptr.astype(np.float64), y_ptr.astype(np.float64)
    pos = np.abs(x) + 0.5
    erf = np.vectorize(math.erf)(x)
    rows = [np.exp(x), np.exp2(x), np.log(pos), np.log2(pos), np.sqrt(pos), 1 / np.sqrt(pos),
            1 / (1 + np.exp(-x)), np.cos(x), erf, np.abs(x), np.maximum(x, y),
            np.minimum(x, y), np.clip(x, -0.5, 0.5), x * y + pos, np.where(x > y, x, y), -x]
    return {"out_ptr": np.stack(rows).astype(np.float32)}


def unary_launch(n: int = 200, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    out = np.zeros((len(UNARY), n), np.float32)
    return Launch("triton-ops-elementwise", elementwise_kernel, (1,), (x, y, out, n),
                  {"BLOCK": 256}, _unary_reference)


def unary_case(n: int = 200, seed: int = 0):
    return unary_launch(n, seed).case()


@triton.jit
def reduce_kernel(x_ptr, sum0_ptr, sum1_ptr, max1_ptr, min0_ptr, argmax1_ptr, cumsum1_ptr,
                  total_ptr, cumprod0_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(sum0_ptr + c, tl.sum(x, axis=0))
    s1 = tl.sum(x, axis=1, keep_dims=True)  # [R, 1]
    tl.store(sum1_ptr + r[:, None], s1)
    tl.store(max1_ptr + r, tl.max(x, axis=1))
    tl.store(min0_ptr + c, tl.min(x, axis=0))
    tl.store(argmax1_ptr + r, tl.argmax(x, axis=1))
    tl.store(cumsum1_ptr + r[:, None] * C + c[None, :], tl.cumsum(x, axis=1))
    tl.store(total_ptr, tl.sum(x))
    tl.store(cumprod0_ptr + tl.arange(0, R * C), tl.ravel(tl.cumprod(x, axis=0)))


def _reduce_reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    x = x_ptr.astype(np.float64)
    f = np.float32
    return {"sum0_ptr": x.sum(0).astype(f), "sum1_ptr": x.sum(1).astype(f),
            "max1_ptr": x.max(1).astype(f), "min0_ptr": x.min(0).astype(f),
            "argmax1_ptr": x.argmax(1).astype(np.int32),
            "cumsum1_ptr": np.cumsum(x, 1).astype(f).reshape(-1),
            "total_ptr": np.array([x.sum()], f),
            "cumprod0_ptr": np.cumprod(x, 0).astype(f).reshape(-1)}


def reduce_launch(rows: int = 8, cols: int = 32, seed: int = 0) -> Launch:
    x = np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32)
    outs = (np.zeros(cols, np.float32), np.zeros(rows, np.float32), np.zeros(rows, np.float32),
            np.zeros(cols, np.float32), np.zeros(rows, np.int32),
            np.zeros(rows * cols, np.float32), np.zeros(1, np.float32),
            np.zeros(rows * cols, np.float32))
    return Launch("triton-ops-reduce", reduce_kernel, (1,), (x, *outs),
                  {"R": rows, "C": cols}, _reduce_reference)


def reduce_case(rows: int = 8, cols: int = 32, seed: int = 0):
    return reduce_launch(rows, cols, seed).case()


@triton.jit
def layout_kernel(a_ptr, b_ptr, q_ptr, w_ptr, dot_ptr, idot_ptr, tr_ptr, cast_ptr, max_ptr,
                  N: tl.constexpr):
    tl.static_assert(N % 16 == 0)
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])  # fp16 [N, N]
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    acc = tl.full((N, N), 1.0, tl.float32)
    acc = tl.dot(a, b, acc, out_dtype=tl.float32)  # + 1
    tl.debug_barrier()
    if pid == 0:  # one program writes the plain outputs; both programs update max_ptr
        tl.store(dot_ptr + i[:, None] * N + i[None, :], acc)
    q = tl.load(q_ptr + i[:, None] * N + i[None, :])  # int8
    w = tl.load(w_ptr + i[:, None] * N + i[None, :])
    if pid == 0:
        tl.store(idot_ptr + i[:, None] * N + i[None, :], tl.dot(q, w))  # int32 accumulation
    t = tl.trans(a)  # [N, N] transposed, stored through a reshape/expand_dims round trip
    flat = tl.reshape(t, (N * N,))
    back = tl.reshape(flat, (N, N))
    e = tl.expand_dims(back, 0)  # [1, N, N]
    if pid == 0:
        tl.store(tr_ptr + i[:, None] * N + i[None, :], tl.reshape(e, (N, N)))
    total = tl.zeros((N,), tl.float32)
    for k in tl.static_range(2):
        total += tl.broadcast_to(tl.sum(a.to(tl.float32), axis=k), (N,))
    rows = tl.cdiv(N, 16) * 16
    x = (total * 0.25 + rows).to(cast_ptr.dtype.element_ty)  # fp32 -> int32 truncates
    if pid == 0:
        tl.store(cast_ptr + i, x)
    tl.atomic_max(max_ptr + i % 4, (i + pid * n_prog).to(tl.int32))


def _layout_reference(a_ptr: np.ndarray, b_ptr: np.ndarray, q_ptr: np.ndarray,
                      w_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    n = a_ptr.shape[0]
    a = a_ptr.astype(np.float32)
    total = a.sum(0) + a.sum(1)
    grid = 2
    i = np.arange(n)
    mx = np.zeros(4, np.int32)
    for pid in range(grid):
        np.maximum.at(mx, i % 4, (i + pid * grid).astype(np.int32))
    return {"dot_ptr": a @ b_ptr.astype(np.float32) + 1,
            "idot_ptr": q_ptr.astype(np.int32) @ w_ptr.astype(np.int32),
            "tr_ptr": a_ptr.T.copy(),
            "cast_ptr": np.trunc(total * np.float32(0.25) + n).astype(np.int32),
            "max_ptr": mx}


def layout_launch(n: int = 32, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((n, n), dtype=np.float32).astype(np.float16) for _ in range(2))
    q, w = (rng.integers(-8, 8, (n, n), dtype=np.int8) for _ in range(2))
    outs = (np.zeros((n, n), np.float32), np.zeros((n, n), np.int32),
            np.zeros((n, n), np.float16), np.zeros(n, np.int32), np.zeros(4, np.int32))
    return Launch("triton-ops-layout", layout_kernel, (2,), (a, b, q, w, *outs), {"N": n},
                  _layout_reference)


def layout_case(n: int = 32, seed: int = 0):
    return layout_launch(n, seed).case()
