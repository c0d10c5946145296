"""The Triton source of a Llama decoder layer's GEMMs and elementwise kernels, written the way
public Triton code writes them (docs/llama3-70b.md, ADR-0920):

- ``matmul_kernel``: the Triton tutorial's matmul (grouped ordering, a float32 accumulator,
  masked K) with a leading grid axis for the tensor-parallel rank, as batched matmuls add
  one (rank ``z`` offsets A, B and C by its strides), and its pointers written with a stride
  per panel, so that packed layouts read and write whole contiguous tiles: B in panels of
  ``BLOCK_SIZE_N`` columns (``stride_bp``), C likewise (``stride_cp``), A in panels of
  ``BLOCK_SIZE_K`` columns (the step ``stride_akt``); with ``stride_bp = BLOCK_SIZE_N *
  stride_bn`` and ``stride_akt = BLOCK_SIZE_K * stride_ak`` it is the tutorial's row-major
  matmul. Rows of A past M are masked rather than wrapped by ``% M``: on the AHBM a wrapped
  row is read from HBM again, a masked one moves nothing (at decode M is the batch, often
  below ``BLOCK_SIZE_M``);
- ``rms_norm_kernel``: Liger-Kernel's RMSNorm forward in its Llama casting mode (the
  reciprocal RMS in float32, the normalised row cast back before the weight), storing
  ``rstd`` as Liger does;
- ``rope_kernel``: Liger-Kernel's RoPE forward (one program per token, every query and key
  head of it, the halves rotated in place with ``cos``/``sin`` of the token's position);
- ``swiglu_kernel``: Liger-Kernel's SwiGLU forward (``silu(gate) * up``, the SiLU in float32).

The module imports ``triton`` (the installed package, or kernbench's stand-in), so it is
loaded only when a case of ``kernels/llama.py`` is built (ADR-0842).
"""

from __future__ import annotations

from kernbench.case.triton_hook import install

install()  # the kernels below are Triton source: the stand-in where no triton is installed
import triton  # noqa: E402,F401
import triton.language as tl  # noqa: E402


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_az, stride_am, stride_ak, stride_akt,
                  stride_bz, stride_bp, stride_bk, stride_bn, stride_cz, stride_cp, stride_cm,
                  stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    rank = tl.program_id(axis=0)  # the tensor-parallel rank: its share of A, B and C
    a_ptr += rank * stride_az
    b_ptr += rank * stride_bz
    c_ptr += rank * stride_cz
    pid = tl.program_id(axis=1)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + pid_n * stride_bp + (offs_k[:, None] * stride_bk
                                          + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_SIZE_K),
                    other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += stride_akt
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + pid_n * stride_cp + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=offs_cm[:, None] < M)


@triton.jit
def rms_norm_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, RSTD_ptr, n_cols, eps,
                    BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y_ptr += row_idx * Y_row_stride
    X_ptr += row_idx * X_row_stride
    RSTD_ptr += row_idx
    X_row = tl.load(X_ptr + col_offsets, mask=mask, other=0)
    X_row_dtype = X_row.dtype
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    X_row = X_row.to(tl.float32)  # Llama's casting: only the rstd is computed in float32
    mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
    rstd = tl.rsqrt(mean_square + eps)
    tl.store(RSTD_ptr, rstd)
    X_row = X_row * rstd
    X_row = X_row.to(X_row_dtype)
    Y_row = X_row * W_row
    tl.store(Y_ptr + col_offsets, Y_row, mask=mask)


@triton.jit
def rope_kernel(q_ptr, q_row_stride, k_ptr, k_row_stride, cos, cos_row_stride, sin,
                sin_row_stride, n_qh: tl.constexpr, n_kh: tl.constexpr, hd: tl.constexpr,
                pad_n_qh: tl.constexpr, pad_n_kh: tl.constexpr, pad_hd: tl.constexpr):
    pid = tl.program_id(0)  # one token: every query and key head of it
    q_ptr = q_ptr + pid * q_row_stride
    k_ptr = k_ptr + pid * k_row_stride
    cos = cos + pid * cos_row_stride
    sin = sin + pid * sin_row_stride
    cos_offsets = tl.arange(0, pad_hd // 2)
    cos_mask = cos_offsets < hd // 2
    cos_row = tl.load(cos + cos_offsets, mask=cos_mask, other=0)
    sin_row = tl.load(sin + cos_offsets, mask=cos_mask, other=0)

    first_half_q_offsets = tl.arange(0, pad_n_qh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_half_k_offsets = tl.arange(0, pad_n_kh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_q_mask = (tl.arange(0, pad_n_qh)[:, None] < n_qh) & (
        tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    first_k_mask = (tl.arange(0, pad_n_kh)[:, None] < n_kh) & (
        tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    q_tile_1 = tl.load(q_ptr + first_half_q_offsets, mask=first_q_mask, other=0).to(cos_row.dtype)
    k_tile_1 = tl.load(k_ptr + first_half_k_offsets, mask=first_k_mask, other=0).to(cos_row.dtype)

    second_half_q_offsets = first_half_q_offsets + (hd // 2)
    second_half_k_offsets = first_half_k_offsets + (hd // 2)
    q_tile_2 = tl.load(q_ptr + second_half_q_offsets, mask=first_q_mask, other=0).to(cos_row.dtype)
    k_tile_2 = tl.load(k_ptr + second_half_k_offsets, mask=first_k_mask, other=0).to(cos_row.dtype)

    # y = [x1, x2] * [cos, cos] + [-x2, x1] * [sin, sin]
    new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
    tl.store(q_ptr + first_half_q_offsets, new_q_tile_1, mask=first_q_mask)
    new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
    tl.store(q_ptr + second_half_q_offsets, new_q_tile_2, mask=first_q_mask)

    new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
    tl.store(k_ptr + first_half_k_offsets, new_k_tile_1, mask=first_k_mask)
    new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
    tl.store(k_ptr + second_half_k_offsets, new_k_tile_2, mask=first_k_mask)


@triton.jit
def silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def swiglu_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    # locate start index
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    # sigmoid requires type float32
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = silu(a_row).cast(b_row.dtype) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)
