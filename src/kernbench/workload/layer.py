"""The kernels of one Llama decoder layer, in order, and of the model's head, each a case at
the point's shapes with the tensor-parallel split over the chip's PEs, and the reduced slice
it replays on (docs/llama3-70b.md, ADR-0920, ADR-0921)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kernbench.trace.hw import HwConfig
from kernbench.workload.model import Point, gemm_tiles

LLAMA = "kernbench.kernels.llama"
#: a slice's tokens at prefill (rows of the norms, RoPE, SwiGLU and the reduce-scatter)
SLICE_TOKENS = 16
#: a decode slice's KV length, a prefill slice's prompt length
SLICE_CONTEXT = 256


@dataclass(frozen=True)
class Step:
    """One kernel launch of the workload: its name, the case that records it (a built-in
    case name or a factory ``module:function``) with its parameters, how the PEs share it,
    the reduced slice that replays (its parameters and what was cut), and whether it runs
    once per layer or once per model (the final norm and the LM head)."""

    name: str
    kernel: str
    case: str
    params: dict[str, Any]
    split: str
    slice_params: dict[str, Any] = field(default_factory=dict)
    slice_note: str = "the whole launch"
    scope: str = "layer"

    @property
    def slice_case(self) -> dict[str, Any]:
        return {**self.params, **self.slice_params}


def _gemm(p: Point, hw: HwConfig, name: str, n: int, k: int, split: str, what: str) -> Step:
    ranks = hw.n_pe
    n_rank, k_rank = (n // ranks, k) if split == "columns" else (n, k // ranks)
    at = replace(p, phase="decode") if name == "lm_head" else p  # the last tokens only
    tiles = gemm_tiles(at, n_rank, k_rank, hw)
    params = {"M": at.tokens, "N": n, "K": k, "ranks": ranks, "split": split, **tiles}
    cut = {"N": ranks * tiles["BN"] if split == "columns" else tiles["BN"]}
    note = "every PE, one output panel each, the whole K"
    if p.phase == "prefill" and name != "lm_head":
        cut["M"] = tiles["BM"]
        note += f", {tiles['BM']} of the {p.tokens} token rows"
    how = (f"each PE its 1/{ranks} of N, the whole K" if split == "columns" else
           f"each PE its 1/{ranks} of K, a partial sum of the whole output")
    return Step(name, f"matmul ({what})", f"{LLAMA}:matmul_case", params, how, cut, note,
                "model" if name == "lm_head" else "layer")


def _rows(p: Point, step: Step, rows_key: str) -> Step:
    """``step`` with a prefill slice of ``SLICE_TOKENS`` token rows."""
    if p.phase != "prefill":
        return step
    return Step(step.name, step.kernel, step.case, step.params, step.split,
                {rows_key: SLICE_TOKENS}, f"{SLICE_TOKENS} of the {p.tokens} token rows",
                step.scope)


def _norm(p: Point, name: str, rows: int, scope: str = "layer") -> Step:
    s = p.shape
    step = Step(name, "rms_norm (Triton, Liger-Kernel)", f"{LLAMA}:rms_norm_case",
                {"rows": rows, "hidden": s.hidden, "eps": s.eps},
                "one program a token row, rows dealt round-robin to the PEs", scope=scope)
    return _rows(p, step, "rows") if scope == "layer" else step


def _attention(p: Point, hw: HwConfig) -> Step:
    s = p.shape
    b = p.batch
    split = "one program per (request, KV head): PE p has KV head p's query group"
    if p.phase == "prefill":
        params = {"S": p.context, "T_q": 16, "T_kv": 128, "H_q": s.heads * b,
                  "H_kv": s.kv_heads * b, "D": s.head_dim, "schedule": "pipelined"}
        cut = {"S": min(p.context, SLICE_CONTEXT), "H_q": s.heads, "H_kv": s.kv_heads}
        return Step("attention", "gqa-prefill (causal flash attention)", "gqa-prefill", params,
                    split, cut, f"one request, {cut['S']} of the {p.context} prompt tokens")
    if p.attention == "paged":
        params = {"batch": b, "S_max": p.context, "H_q": s.heads, "H_kv": s.kv_heads,
                  "D": s.head_dim, "page": 16, "splits": 8, "even": True}
        cut = {"batch": 1, "S_max": min(p.context, SLICE_CONTEXT)}
        return Step("attention", "serving-decode (paged, split-KV, Triton)", "serving-decode",
                    params, "one program per (request, KV head, split)", cut,
                    f"one request of {cut['S_max']} tokens")
    t_kv = 512
    while p.context % t_kv:
        t_kv //= 2
    params = {"S_kv": p.context, "T_kv": t_kv, "H_q": s.heads * b, "H_kv": s.kv_heads * b,
              "D": s.head_dim, "stream": "lazy"}
    cut = {"S_kv": min(p.context, max(t_kv, SLICE_CONTEXT)), "H_q": s.heads,
           "H_kv": s.kv_heads}
    return Step("attention", "gqa-decode (flash decoding)", "gqa-decode", params, split, cut,
                f"one request, {cut['S_kv']} of the {p.context} KV tokens")


def _reduce(p: Point, hw: HwConfig, name: str) -> Step:
    """The reduction after a row-parallel GEMM: round the ring where the PEs have neighbour
    links only, straight to each chunk's PE where the topology routes (ADR-0921)."""
    s = p.shape
    how = "ring" if hw.topology == "ring" else "direct"
    step = Step(name, f"{how} reduce-scatter + residual (IPCQ)", f"{LLAMA}:reduce_scatter_case",
                {"M": p.tokens, "H": s.hidden, "ranks": hw.n_pe, "algorithm": how},
                f"each PE sums 1/{hw.n_pe} of the output from the others' partials ({how}), "
                "adds the residual")
    return _rows(p, step, "M")


def layer_steps(p: Point, hw: HwConfig) -> list[Step]:
    """One decoder layer's kernels in order."""
    s = p.shape
    qkv = (s.heads + 2 * s.kv_heads) * s.head_dim
    rope = Step("rope", "rope (Triton, Liger-Kernel)", f"{LLAMA}:rope_case",
                {"tokens": p.tokens, "H_q": s.heads, "H_kv": s.kv_heads, "D": s.head_dim,
                 "position": p.context if p.phase == "decode" else 0,
                 "prefill": p.phase == "prefill"},
                "one program a token (all its heads), tokens dealt round-robin to the PEs")
    swiglu = Step("swiglu", "swiglu (Triton, Liger-Kernel)", f"{LLAMA}:swiglu_case",
                  {"tokens": p.tokens, "ffn": s.ffn, "ranks": hw.n_pe},
                  "each rank's gate/up share, rows of it dealt round-robin to the PEs")
    return [
        _norm(p, "attn_norm", p.tokens),
        _gemm(p, hw, "qkv_proj", qkv, s.hidden, "columns", "fused QKV projection"),
        _rows(p, rope, "tokens"),
        _attention(p, hw),
        _gemm(p, hw, "o_proj", s.hidden, s.heads * s.head_dim, "rows", "output projection"),
        _reduce(p, hw, "o_reduce"),
        _norm(p, "mlp_norm", p.tokens),
        _gemm(p, hw, "gate_up_proj", 2 * s.ffn, s.hidden, "columns", "gate/up projection"),
        _rows(p, swiglu, "tokens"),
        _gemm(p, hw, "down_proj", s.hidden, s.ffn, "rows", "down projection"),
        _reduce(p, hw, "down_reduce"),
    ]


def padded_vocab(vocab: int, multiple: int) -> int:
    """The LM head's rows padded as a tensor-parallel vocabulary pads them."""
    return -(-vocab // multiple) * multiple


def head_steps(p: Point, hw: HwConfig) -> list[Step]:
    """The model's kernels after its layers, once per forward: the final RMSNorm and the LM
    head, on the last token of each request (decode: every token)."""
    s = p.shape
    return [_norm(p, "final_norm", p.batch, scope="model"),
            _gemm(p, hw, "lm_head", padded_vocab(s.vocab, hw.n_pe * 128), s.hidden, "columns",
                  "LM head")]
