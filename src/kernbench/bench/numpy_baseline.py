"""Plain-numpy implementations of the library's attention loops, for ``kernbench bench``.

Each is the same tiled loop as the kernel (same tiles, same order, bf16 inputs, float32
compute, P rounded to bf16 before the P·V GEMM, the output rounded to bf16), written the
way a numpy user would: inputs converted to float32 once where the kernel reads them
repeatedly. bf16 arrays are uint16 bits (``kernbench.schemas.bf16``: the fastest exact
conversions numpy has; ``ml_dtypes`` alone costs half a second to import). ``generate``
makes the inputs exactly as ``kb.randn`` defines them.

``python -m kernbench.bench.numpy_baseline SPEC`` is the whole-process side of the
``replay_process_*`` figures: a process that imports numpy, generates the inputs, runs the
loop once, runs the case's reference once on the same float32 inputs and compares (the
same tolerance formula as replay's verdict), and prints ``{"max_abs_err", "ok"}``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kernbench.schemas.bf16 import f32_to_bf16, round_bf16, to_f32

F32 = np.float32
NEG_BIG = -1.0e30
#: bf16 output tolerance (replay's, kernbench.replay.verdict.TOLERANCES["bfloat16"])
RTOL, ATOL = 1.6e-2, 2.0 ** -7


def generate(tensors: Mapping[str, tuple[tuple[int, ...], int]]) -> dict[str, np.ndarray]:
    """name -> (shape, seed): ``default_rng(seed).standard_normal(shape, float32) * 1.0``
    rounded to bfloat16 (``kb.randn`` as docs/trace-format.md defines it; the ``* 1.0`` is
    the identity on float32 and skipped), as uint16 bits."""
    return {name: f32_to_bf16(np.random.default_rng(seed).standard_normal(shape, dtype=F32))
            for name, (shape, seed) in tensors.items()}


def _sweep(q: np.ndarray, kf: np.ndarray, vf: np.ndarray, t_kv: int, tiles: int,
           scale: float, masks: Mapping[int, np.ndarray]) -> np.ndarray:
    """One online-softmax sweep of the float32 rows ``q`` over ``tiles`` K/V tiles."""
    rows, d = q.shape
    m = np.full((rows, 1), NEG_BIG, F32)
    l = np.zeros((rows, 1), F32)  # noqa: E741
    acc = np.zeros((rows, d), F32)
    for j in range(tiles):
        kt, vt = kf[j * t_kv:(j + 1) * t_kv], vf[j * t_kv:(j + 1) * t_kv]
        s = (q @ kt.T) * F32(scale)
        if j in masks:
            s = s + masks[j]
        m_new = np.maximum(m, s.max(axis=1, keepdims=True))
        p = np.exp(s - m_new)
        alpha = np.exp(m - m_new)
        l = l * alpha + p.sum(axis=1, keepdims=True)  # noqa: E741
        acc = acc * alpha + round_bf16(p) @ vt
        m = m_new
    return acc / l


def prefill(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, S: int, T_q: int,  # noqa: N803
            T_kv: int, G: int, D: int, scale: float, **_: Any) -> np.ndarray:
    """gqa-prefill's loop: per KV head, per query tile, the causal sweep of K/V tiles."""
    h_kv = k.shape[0]
    rows = T_q * G
    out = np.empty(q.shape, np.uint16)
    for h in range(h_kv):
        kf, vf = to_f32(k[h]), to_f32(v[h])
        for i in range(S // T_q):
            q0 = i * T_q
            qt = to_f32(q[h, q0:q0 + T_q].reshape(rows, D))
            last = (q0 + T_q - 1) // T_kv
            masks = {}
            for j in range(last + 1):
                k0 = j * T_kv
                if k0 + T_kv - 1 > q0:
                    keep = np.arange(k0, k0 + T_kv)[None, :] <= np.arange(q0, q0 + T_q)[:, None]
                    mask = np.where(keep, F32(0.0), F32(NEG_BIG))
                    masks[j] = np.repeat(mask, G, axis=0)  # rows ordered (t, g)
            res = _sweep(qt, kf, vf, T_kv, last + 1, scale, masks)
            out[h, q0:q0 + T_q] = f32_to_bf16(res.reshape(T_q, G, D))
    return out


def decode(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, S_kv: int, T_kv: int,  # noqa: N803
           G: int, D: int, scale: float, **_: Any) -> np.ndarray:
    """gqa-decode's loop: per KV head, the sweep of its G query rows over K/V tiles."""
    h_kv = k.shape[0]
    out = np.empty(q.shape, np.uint16)
    for h in range(h_kv):
        kf, vf = to_f32(k[h]), to_f32(v[h])
        qh = to_f32(q[h * G:(h + 1) * G])
        out[h * G:(h + 1) * G] = f32_to_bf16(_sweep(qh, kf, vf, T_kv, S_kv // T_kv, scale, {}))
    return out


LOOPS = {"gqa-prefill": prefill, "gqa-decode": decode}


def spec_of(case: Any) -> str:
    """The JSON argument of ``main`` for a built case: its name, params, input seeds."""
    return json.dumps({"case": case.name, "params": dict(case.params),
                       "case_params": dict(case.case_params or case.params),
                       "tensors": {n: [list(t.shape), t.init.seed] for n, t in
                                   case.tensors.items() if t.role == "input"}})


def whole(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Generate, loop once, reference once on the same float32 inputs, compare."""
    from kernbench.case.references import REFERENCES

    bits = generate({n: (tuple(s), seed) for n, (s, seed) in spec["tensors"].items()})
    loop: Any = LOOPS[spec["case"]]
    out = loop(**bits, **spec["params"])
    inputs = {n: to_f32(b) for n, b in bits.items()}
    del bits
    expected = np.asarray(REFERENCES[spec["case"]](**spec["case_params"])(**inputs)["o"])
    got = to_f32(out).astype(np.float64)
    e = expected.astype(np.float64)
    err = np.abs(got - e)
    scale = max(1.0, float(np.abs(e).max()))
    ok = bool((err <= ATOL * scale + RTOL * np.abs(e)).all())
    return {"max_abs_err": float(err.max()), "ok": ok}


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    print(json.dumps(whole(json.loads(args[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
