"""The built-in serving-style decode (``serving-decode``): a paged, split-KV GQA decode as
LLM-serving engines write it in Triton (``kernels/paged_decode.py``), at Llama3-70B shapes
by default: 64 query heads, 8 KV heads, head dim 128, four requests of uneven lengths up to
32k tokens, pages of 16 tokens. Its kernel module imports ``triton``, so it is loaded when
the case is built, not when the registry is (docs/attention-designs.md, ADR-0842)."""

from __future__ import annotations

import kernbench as kb
from kernbench.kernels.gqa import LLAMA3_70B


@kb.register_case("serving-decode")
def serving_decode_case(batch: int = 4, S_max: int = 32768, H_q: int = LLAMA3_70B["H_q"],  # noqa: N803
                        H_kv: int = LLAMA3_70B["H_kv"], D: int = LLAMA3_70B["D"],
                        page: int = 16, splits: int = 8, dtype: str = "bfloat16",
                        seed: int = 0, even: bool = False) -> kb.Case:
    """``batch`` requests (the first ``S_max`` tokens long, the others drawn up to it, or
    all ``S_max`` long if ``even``), their K/V in pages of ``page`` tokens, each (request,
    KV head) in ``splits`` programs."""
    if H_q % H_kv or min(batch, S_max, H_q, H_kv, D, page, splits) <= 0:
        raise kb.BadInputError(f"serving-decode: need positive sizes and H_q % H_kv == 0, got "
                               f"batch={batch} S_max={S_max} H_q={H_q} H_kv={H_kv} D={D} "
                               f"page={page} splits={splits}")
    if dtype not in ("bfloat16", "float16"):
        raise kb.BadInputError(f"serving-decode: dtype {dtype!r} is not bfloat16 or float16")
    from kernbench.kernels import paged_decode  # imports triton: only for this case

    return paged_decode.case(batch, S_max, H_q, H_kv, D, page, splits, dtype, seed, even)
