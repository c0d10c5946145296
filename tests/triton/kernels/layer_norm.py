"""Two-pass layer norm (the tutorial's forward): a loop over column blocks for the mean, a
second for the variance, a third to normalise; the last block of each loop is masked.
Writes the normalised rows and each row's mean and 1/std."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def launch(rows: int = 4, n: int = 100, block: int = 32, eps: float = 1e-5,
           seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, n), dtype=np.float32) * np.float32(2.0) + np.float32(0.5)
    w = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    y = np.zeros((rows, n), np.float32)
    mean, rstd = np.zeros(rows, np.float32), np.zeros(rows, np.float32)

    def reference(X: np.ndarray, W: np.ndarray, B: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        mu = X.mean(axis=1, dtype=np.float64)
        r = 1.0 / np.sqrt(X.var(axis=1, dtype=np.float64) + eps)
        yy = (X - mu[:, None]) * r[:, None] * W + B
        return {"Y": yy.astype(np.float32), "Mean": mu.astype(np.float32),
                "Rstd": r.astype(np.float32)}

    return Launch("triton-layer-norm", layer_norm_fwd, (rows,),
                  (x, y, w, b, mean, rstd, n, n, eps), {"BLOCK_SIZE": block}, reference)


def case(rows: int = 4, n: int = 100, block: int = 32, eps: float = 1e-5, seed: int = 0):
    return launch(rows, n, block, eps, seed).case()
