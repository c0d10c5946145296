"""Golden traces: every built-in case at small params, kept in ``traces/`` and re-recorded in
CI. Regenerate them on purpose (after a deliberate model change) with::

    python -m kernbench.kernels.golden traces/
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: trace name -> (case, params); small enough that all of them stay under 200 KB
GOLDEN: dict[str, tuple[str, dict[str, Any]]] = {
    "scale-exp": ("scale-exp", {"n": 1024, "tile": 256}),
    "gemm": ("gemm", {"M": 256, "N": 256, "K": 128}),
    "softmax": ("softmax", {"rows": 16, "n": 256, "programs": 4}),
    "small-ops": ("small-ops", {"iters": 20}),
    "stream-sum": ("stream-sum", {"tiles": 4, "rows": 32}),
    "flash-attn": ("flash-attn", {"s_kv": 512, "t_kv": 128}),
    "gqa-decode": ("gqa-decode", {"S_kv": 1024, "T_kv": 256, "H_q": 16, "H_kv": 2}),
    "gqa-decode-composite": ("gqa-decode", {"S_kv": 1024, "T_kv": 512, "H_q": 16, "H_kv": 2,
                                            "stream": "composite"}),
    "gqa-prefill": ("gqa-prefill", {"S": 128, "T_q": 16, "T_kv": 64, "H_q": 8, "H_kv": 1}),
    "ring-prefill": ("ring-attention", {"n_ranks": 2, "S_kv_per_rank": 64}),
    "ring-decode": ("ring-attention", {"n_ranks": 2, "S_kv_per_rank": 128, "phase": "decode"}),
    "serving-decode": ("serving-decode", {"batch": 2, "S_max": 40, "H_q": 16, "H_kv": 1,
                                          "D": 16, "page": 16, "splits": 2}),
}


#: the preset of the traces in ``traces/`` and of their twins in ``traces/v2/``
PRESET, TWIN_PRESET = "ahbm-v1", "ahbm-v2"


def record_golden(name: str, out: Path, hw: str = PRESET):
    from kernbench.kernels.registry import build_case
    from kernbench.record.recorder import record

    case, params = GOLDEN[name]
    return record(build_case(case, params), out, hw=hw)


def regenerate(folder: str | Path) -> list[Path]:
    """Every golden trace into ``folder`` (ahbm-v1) and its twin into ``folder/v2``."""
    folder = Path(folder)
    return ([record_golden(name, folder / f"{name}.ktrace").path for name in GOLDEN]
            + [record_golden(name, folder / "v2" / f"{name}.ktrace", TWIN_PRESET).path
               for name in GOLDEN])


if __name__ == "__main__":  # pragma: no cover - the documented regeneration command
    for path in regenerate(sys.argv[1] if len(sys.argv) > 1 else "traces"):
        print(path)
