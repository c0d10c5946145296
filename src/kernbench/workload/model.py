"""A model a workload runs (its shapes), the point it runs at (phase, batch, context), and the
tile plan of its GEMMs on a hardware configuration (docs/llama3-70b.md, ADR-0920)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernbench.errors import BadInputError, closest
from kernbench.trace.hw import HwConfig

PHASES = ("decode", "prefill")
ATTENTION = ("contiguous", "paged")


@dataclass(frozen=True)
class Shape:
    """A Llama decoder's shapes (Llama3-70B by default)."""

    hidden: int = 8192
    heads: int = 64
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 28672
    layers: int = 80
    vocab: int = 128256
    eps: float = 1e-5

    def weight_bytes(self) -> int:
        """One layer's weight bytes (bf16): QKV, output, gate/up and down projections."""
        qkv = (self.heads + 2 * self.kv_heads) * self.head_dim
        return 2 * self.hidden * (qkv + self.heads * self.head_dim + 3 * self.ffn)


MODELS: dict[str, Shape] = {"llama3-70b": Shape()}


@dataclass(frozen=True)
class Point:
    """Where a workload runs: the model's shapes, the phase, the batch (requests) and the
    context (the KV length a decoded token attends to; a prefill's prompt length), and the
    attention kernel decode uses."""

    model: str
    shape: Shape
    phase: str = "decode"
    batch: int = 1
    context: int = 4096
    attention: str = "contiguous"

    @property
    def tokens(self) -> int:
        """The rows of the layer's activations: one per request at decode, the prompt's at
        prefill."""
        return self.batch if self.phase == "decode" else self.batch * self.context


#: the point's own parameters (the shape's fields are parameters too)
POINT_PARAMS: dict[str, Any] = {"batch": 1, "context": 4096, "attention": "contiguous"}


def point(model: str, phase: str = "decode", params: Mapping[str, Any] | None = None,
          ranks: int = 8) -> Point:
    """The point of ``model`` at ``phase`` with ``params`` (batch, context, attention, and any
    shape field to reduce the model: ``hidden=256``); BadInputError naming what is wrong."""
    if model not in MODELS:
        raise BadInputError(f"unknown workload {model!r}{closest(model, MODELS)}; known: "
                            f"{', '.join(MODELS)}")
    if phase not in PHASES:
        raise BadInputError(f"workload phase {phase!r} is not one of {PHASES}"
                            f"{closest(phase, PHASES)}")
    params = dict(params or {})
    fields = {f.name: f for f in dataclasses.fields(Shape)}
    known = [*POINT_PARAMS, *fields]
    for key, value in params.items():
        if key not in known:
            raise BadInputError(f"workload {model} has no parameter {key!r}"
                                f"{closest(key, known)}; known: {', '.join(known)}")
        default = POINT_PARAMS.get(key, getattr(MODELS[model], key, None))
        want = type(default)
        ok = isinstance(value, want) and not isinstance(value, bool) or (
            want is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise BadInputError(f"workload parameter {key} expects {want.__name__}, got "
                                f"{value!r}")
    shape = dataclasses.replace(MODELS[model], **{k: v for k, v in params.items()
                                                  if k in fields})
    p = Point(model, shape, phase, **{k: v for k, v in params.items() if k in POINT_PARAMS})
    _check(p, ranks)
    return p


def _check(p: Point, ranks: int) -> None:
    s = p.shape
    sizes = {"batch": p.batch, "context": p.context, **{f.name: getattr(s, f.name)
                                                        for f in dataclasses.fields(s)}}
    bad = [f"{k}={v}" for k, v in sizes.items() if not v > 0]
    if bad:
        raise BadInputError(f"workload {p.model}: sizes must be positive, got {', '.join(bad)}")
    if p.attention not in ATTENTION:
        raise BadInputError(f"workload attention {p.attention!r} is not one of {ATTENTION}"
                            f"{closest(p.attention, ATTENTION)}")
    if p.attention == "paged" and p.phase != "decode":
        raise BadInputError("workload attention 'paged' is a decode kernel (serving-decode); "
                            "prefill runs gqa-prefill")
    need = {"heads": s.heads, "kv_heads": s.kv_heads, "ffn": s.ffn, "hidden": s.hidden}
    uneven = [f"{k}={v}" for k, v in need.items() if v % ranks]
    if uneven or s.heads % s.kv_heads:
        raise BadInputError(f"workload {p.model}: tensor parallelism over {ranks} PEs needs "
                            f"heads, kv_heads, ffn and hidden divisible by {ranks} and heads "
                            f"by kv_heads, got {', '.join(uneven) or f'heads={s.heads}'}")
    if s.head_dim < 16 or s.head_dim & (s.head_dim - 1):
        raise BadInputError(f"workload {p.model}: head_dim={s.head_dim} must be a power of "
                            "two >= 16 (a tl.dot operand)")


def _pow2_dividing(n: int, cap: int, floor: int = 16) -> int:
    """The largest power of two ``<= cap`` dividing ``n``; BadInputError below ``floor``."""
    b = cap
    while b >= floor:
        if n % b == 0:
            return b
        b //= 2
    raise BadInputError(f"workload GEMM: dimension {n} has no power-of-two tile >= {floor} "
                        f"dividing it (at most {cap})")


#: prefill's output tiles by preference: the largest the PE's scratch holds wins (the
#: GEMM's arithmetic intensity grows with BM * BN / (BM + BN))
PREFILL_TILES = ((512, 512, 128), (256, 512, 128), (256, 256, 256), (128, 256, 256),
                 (128, 128, 256), (64, 64, 128), (32, 32, 64), (16, 16, 32))


def gemm_scratch(bm: int, bn: int, bk: int, stages: int) -> int:
    """A tile's kernel-scratch bytes: the float32 accumulator, its bf16 result and
    ``stages`` bf16 A and B tiles in flight."""
    return 4 * bm * bn + 2 * bm * bn + 2 * stages * (bm + bn) * bk


def gemm_tiles(p: Point, n_rank: int, k_rank: int, hw: HwConfig) -> dict[str, int]:
    """``BM, BN, BK, stages`` of one GEMM (each rank ``[tokens, k_rank] @ [k_rank,
    n_rank]``). Decode streams weights: 128 output columns (the GEMM engine's width) by 512
    of K per tile, double-buffered, so a PE keeps a few programs resident. Prefill reuses
    tiles: the largest output tile the scratch holds (``PREFILL_TILES``)."""
    m = p.tokens
    if p.phase == "decode":
        bm = min(64, max(16, 1 << (m - 1).bit_length()))
        return {"BM": bm, "BN": _pow2_dividing(n_rank, 128), "BK": _pow2_dividing(k_rank, 512),
                "stages": 2}
    budget = hw.kernel_scratch_bytes * 7 // 8
    for bm, bn, bk in PREFILL_TILES:
        if m % bm or n_rank % bn or k_rank % bk:
            continue
        if gemm_scratch(bm, bn, bk, 2) <= budget:
            return {"BM": bm, "BN": bn, "BK": bk, "stages": 2}
    bm = _pow2_dividing(m, 64)
    return {"BM": bm, "BN": _pow2_dividing(n_rank, 64), "BK": _pow2_dividing(k_rank, 64),
            "stages": 2}
