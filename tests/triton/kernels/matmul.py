"""Matmul in the tutorial's grouped ordering (``GROUP_SIZE_M`` row blocks share B tiles), M
and N wrapped by ``%`` and K masked (K is not a multiple of ``BLOCK_SIZE_K``), fp16 in,
float32 accumulator, fp16 out. The kernel is the one ``kernbench bench`` runs against Triton's
interpreter (``kernbench.bench.triton_kernels``), here at test sizes."""

from __future__ import annotations

import numpy as np
import triton

from kernbench.bench.triton_kernels import matmul_kernel
from tests.triton.kernels.spec import Launch


def reference(a_ptr: np.ndarray, b_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    return {"c_ptr": (a_ptr.astype(np.float32) @ b_ptr.astype(np.float32)).astype(np.float16)}


def launch(m: int = 48, n: int = 40, k: int = 40, block_m: int = 16, block_n: int = 16,
           block_k: int = 16, group_m: int = 2, seed: int = 0, num_stages: int = 0) -> Launch:
    """``num_stages=0``: the launch gives none (the front end's default applies)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    meta = {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
            "GROUP_SIZE_M": group_m}
    return Launch("triton-matmul", matmul_kernel,
                  lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"])
                                * triton.cdiv(n, meta["BLOCK_SIZE_N"]),),
                  (a, b, c, m, n, k, k, 1, n, 1, n, 1), meta, reference,
                  num_stages=num_stages or None)


def case(m: int = 48, n: int = 40, k: int = 40, block_m: int = 16, block_n: int = 16,
         block_k: int = 16, group_m: int = 2, seed: int = 0, num_stages: int = 0):
    return launch(m, n, k, block_m, block_n, block_k, group_m, seed, num_stages).case()
