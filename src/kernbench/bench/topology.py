"""``kernbench bench`` keys of ring decode on routed links (issue 37's figure; docs/
attention-designs.md, "Ring decode on routed links"; figures, never timed tests):

- ``ring_decode_v3_{topology}_{combine}_efficiency``: ring decode 8 x 4096 (8 x 1024 with
  ``quick``) on ahbm-v3 with ``topology`` torus2d (its own) and switch, each combine (the
  ring's ``tree``, and ``direct`` and ``binomial`` by PE index, docs/adr/0751);
- ``ring_decode_v3_switch_direct_replay_ok``: that trace replays verified.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

TOPOLOGIES = ("torus2d", "switch")
COMBINES = ("tree", "direct", "binomial")


def measure(quick: bool = False) -> dict[str, Any]:
    from kernbench.analyze import metrics
    from kernbench.kernels.registry import build_case
    from kernbench.record.recorder import record
    from kernbench.replay import replay
    from kernbench.trace.hw import PRESETS

    out: dict[str, Any] = {"ring_decode_v3_s_kv_per_rank": 1024 if quick else 4096}
    with tempfile.TemporaryDirectory(prefix="kb-topology-bench-") as tmp:
        for topology in TOPOLOGIES:
            hw = dataclasses.replace(PRESETS["ahbm-v3"], topology=topology)
            for combine in COMBINES:
                case = build_case("ring-attention", {
                    "phase": "decode", "combine": combine,
                    "S_kv_per_rank": out["ring_decode_v3_s_kv_per_rank"]})
                trace = record(case, Path(tmp) / f"{topology}-{combine}.ktrace", hw=hw)
                key = f"ring_decode_v3_{topology}_{combine}"
                out[f"{key}_efficiency"] = round(metrics(trace)["efficiency"], 4)
                if (topology, combine) == ("switch", "direct"):
                    out[f"{key}_replay_ok"] = bool(replay(trace.path).ok)
    return out
