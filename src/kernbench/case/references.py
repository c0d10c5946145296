"""The numpy references of the built-in cases, importable without the recorder.

``REFERENCES[case_name](**case_params)`` returns the case's reference: a function of the
input arrays returning the expected outputs. Replay looks built-in references up here, by
the manifest's case name and recorded parameters, so verifying a built-in trace never
imports ``tl``, the kernels or the recorder (docs/adr/0005-isolated-replay.md). The case
factories in ``kernbench/kernels/`` take their references from this module, so there is one
definition of each. numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Reference = Callable[..., dict[str, np.ndarray]]


def _f32(x: np.ndarray) -> np.ndarray:
    """``x`` as float32: itself when it is float32 already (replay hands built-in references
    its inputs converted to float32 once), else converted."""
    return np.asarray(x, np.float32)


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """softmax(q k^T * scale) v in float32 (inputs upcast from their dtype)."""
    s = _f32(q) @ _f32(k).T * np.float32(scale)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ _f32(v)


def decode_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    h_kv, _, d = k.shape
    g = q.shape[0] // h_kv
    qf = _f32(q).reshape(h_kv, g, d)
    s = np.einsum("hgd,hsd->hgs", qf, _f32(k)) * np.float32(scale)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("hgs,hsd->hgd", p, _f32(v)).reshape(h_kv * g, d)


def prefill_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
                      chunk: int = 256) -> np.ndarray:
    """Causal attention per KV head, ``chunk`` query positions at a time (each chunk only
    sees the keys up to its last position), so memory stays O(chunk * S) at any S."""
    h_kv, s_len, g, d = q.shape
    out = np.empty(q.shape, np.float32)
    for h in range(h_kv):
        kf, vf = _f32(k[h]), _f32(v[h])
        for t0 in range(0, s_len, chunk):
            t1 = min(s_len, t0 + chunk)
            qc = _f32(q[h, t0:t1]).reshape((t1 - t0) * g, d)  # rows (t, g)
            s = (qc @ kf[:t1].T) * np.float32(scale)
            pos = np.repeat(np.arange(t0, t1), g)[:, None]
            s = np.where(np.arange(t1)[None, :] <= pos, s, -np.inf)
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            out[h, t0:t1] = (p @ vf[:t1]).reshape(t1 - t0, g, d)
    return out


def _scale(d: int) -> float:
    return 1.0 / float(np.sqrt(d))


# -- one reference factory per built-in case: the case factory's parameters -> reference ----
def scale_exp(**_: Any) -> Reference:
    return lambda x: {"y": np.exp(x * 0.5)}


def gemm(M: int, N: int, BM: int, BN: int, **_: Any) -> Reference:  # noqa: N803
    def reference(a, bt):
        c = _f32(a) @ _f32(bt).T
        return {"c": c.reshape(M // BM, BM, N // BN, BN).transpose(0, 2, 1, 3)}

    return reference


def softmax(**_: Any) -> Reference:
    def reference(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return {"y": e / e.sum(axis=-1, keepdims=True)}

    return reference


def small_ops(iters: int, **_: Any) -> Reference:
    def reference(x):
        acc = _f32(x)
        for _ in range(iters):
            t = acc * np.float32(0.5) + acc
            acc = np.exp(t * np.float32(-0.25))
        return {"y": acc}

    return reference


def stream_sum(programs: int, tiles: int, rows: int, cols: int, **_: Any) -> Reference:
    def reference(x):
        t = _f32(x.reshape(programs, tiles, rows, cols))
        return {"y": (np.exp(t * np.float32(0.5)) * np.float32(2.0)).sum(axis=1)}

    return reference


def flash_attn(d: int, **_: Any) -> Reference:
    scale = _scale(d)
    return lambda q, k, v: {"o": attention_reference(q, k, v, scale)}


def gqa_decode(D: int, **_: Any) -> Reference:  # noqa: N803
    scale = _scale(D)
    return lambda q, k, v: {"o": decode_reference(q, k, v, scale)}


def paged_decode_reference(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                           page_table: np.ndarray, kv_indptr: np.ndarray, page: int
                           ) -> np.ndarray:
    """Decode attention of every request over its pages (K/V ``[pages, H_kv, page, D]``,
    request r's tokens ``kv_indptr[r]..kv_indptr[r+1]`` in pages ``page_table[r]``)."""
    b_n, h_q, d = q.shape
    h_kv = k_cache.shape[1]
    group, scale = h_q // h_kv, _scale(d)
    out = np.zeros((b_n, h_q, d), np.float32)
    for b in range(b_n):
        n = int(kv_indptr[b + 1] - kv_indptr[b])
        pages = page_table[b, :-(-n // page)]
        for g in range(h_kv):
            k = _f32(k_cache[pages, g]).reshape(-1, d)[:n]
            v = _f32(v_cache[pages, g]).reshape(-1, d)[:n]
            out[b, g * group:(g + 1) * group] = attention_reference(
                q[b, g * group:(g + 1) * group], k, v, scale)
    return out


def serving_decode(page: int, **_: Any) -> Reference:
    def reference(Q, K_cache, V_cache, page_table, kv_indptr, **__):  # noqa: N803
        return {"Out": paged_decode_reference(Q, K_cache, V_cache, page_table, kv_indptr,
                                              page)}

    return reference


def gqa_prefill(D: int, **_: Any) -> Reference:  # noqa: N803
    scale = _scale(D)
    return lambda q, k, v: {"o": prefill_reference(q, k, v, scale)}


def ring_attention(n_ranks: int, phase: str, T_q: int, G: int, D: int,  # noqa: N803
                   causal: bool = False, layout: str = "contiguous", **_: Any) -> Reference:
    scale = _scale(D)
    if phase == "prefill" and causal:
        striped = layout == "striped"

        def to_seq(x: np.ndarray) -> np.ndarray:  # [n, S, ...] -> [1, n*S, ...] token order
            # contiguous: rank-major; striped: token p is local token p // n of rank p % n
            return np.ascontiguousarray(np.swapaxes(x, 0, 1) if striped else x).reshape(
                1, -1, *x.shape[2:])

        def causal_reference(q, k, v):
            out = prefill_reference(to_seq(q), to_seq(k), to_seq(v), scale)[0]
            s = q.shape[1]
            back = np.swapaxes(out.reshape(s, n_ranks, G, D), 0, 1) if striped else \
                out.reshape(n_ranks, s, G, D)
            return {"o": np.ascontiguousarray(back)}

        return causal_reference
    if phase == "prefill":
        def reference(q, k, v):
            qf = q.reshape(n_ranks * T_q * G, D)
            out = attention_reference(qf, k.reshape(-1, D), v.reshape(-1, D), scale)
            return {"o": out.reshape(n_ranks, T_q, G, D)}

        return reference
    return lambda q, k, v: {"o": attention_reference(q, k.reshape(-1, D), v.reshape(-1, D),
                                                     scale)}


#: built-in case name -> reference factory (called with the case's recorded parameters)
REFERENCES: dict[str, Callable[..., Reference]] = {
    "scale-exp": scale_exp,
    "gemm": gemm,
    "softmax": softmax,
    "small-ops": small_ops,
    "stream-sum": stream_sum,
    "flash-attn": flash_attn,
    "gqa-decode": gqa_decode,
    "gqa-prefill": gqa_prefill,
    "ring-attention": ring_attention,
    "serving-decode": serving_decode,
}

#: built-in case name -> the kernels (``module:qualname``, as the manifest records them) its
#: factory may use: lets replay tell a built-in recording from a user's kernel of the same
#: case name without importing the kernels (plain data, never imported)
BUILTIN_KERNELS: dict[str, frozenset[str]] = {
    "scale-exp": frozenset({"kernbench.kernels.examples:scale_exp"}),
    "gemm": frozenset({"kernbench.kernels.examples:gemm"}),
    "softmax": frozenset({"kernbench.kernels.examples:row_softmax"}),
    "small-ops": frozenset({"kernbench.kernels.examples:small_ops"}),
    "stream-sum": frozenset({"kernbench.kernels.streaming:stream_sum"}),
    "flash-attn": frozenset({"kernbench.kernels.flash:flash_attn"}),
    "gqa-decode": frozenset({"kernbench.kernels.gqa:gqa_decode_lazy",
                             "kernbench.kernels.gqa:gqa_decode_composite"}),
    "gqa-prefill": frozenset({"kernbench.kernels.gqa:gqa_prefill",
                              "kernbench.kernels.gqa:gqa_prefill_pipelined"}),
    "ring-attention": frozenset({"kernbench.kernels.ring:ring_prefill",
                                 "kernbench.kernels.ring:ring_prefill_causal",
                                 "kernbench.kernels.ring:ring_prefill_pipelined",
                                 "kernbench.kernels.ring:ring_prefill_causal_pipelined",
                                 "kernbench.kernels.ring_decode:ring_decode"}),
    "serving-decode": frozenset({"kernbench.kernels.paged_decode:paged_decode_kernel"}),
}
