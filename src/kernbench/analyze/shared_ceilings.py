"""The roofline's shared ceilings (ADR-0742): the time the chip's shared parts need for a
trace's traffic at full speed, next to the per-engine ceilings of ``analyze.metrics``.

- ``hbm_stack``: every HBM byte the DMA engines moved, over ``hbm_total_gbps``;
- ``tcm``: the busiest PE's TCM bytes (``schemas.traffic``: its ops' operands in TCM or
  staging, composite parents and scope rows excluded), over ``tcm_gbps``;
- ``links``: the busiest link's bytes (each send's bytes on every link of its route,
  ``trace.topology``), over ``link_gbps``.

A ceiling of a part the hardware does not share is 0 (absent): ``hbm_total_gbps`` or
``tcm_gbps`` 0, and links on hardware whose PEs run alone (``HwConfig.shared`` false: a
neighbour send is its own link, the per-engine ``link_tx`` ceiling), so ahbm-v1 and ahbm-v2
metrics keep their values.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import polars as pl

from kernbench.analyze.frames import operands, scan_ops
from kernbench.schemas.ops import Engine, Kind
from kernbench.schemas.traffic import TCM_SPACES
from kernbench.trace import Trace
from kernbench.trace.hw import HwConfig
from kernbench.trace.topology import Link, link_name, links, neighbour, route

_RINGS = ("ring", "bidir_ring")
#: the shared ceilings, by name: the metric key of each one's time (ps)
SHARED_CEILINGS: dict[str, str] = {"hbm_stack": "roofline_ps_hbm_stack",
                                   "tcm": "roofline_ps_tcm", "links": "roofline_ps_links"}
_BOOKKEEPING = (Kind.COMPOSITE.value, Kind.SCOPE.value)


def _ops(trace: Trace, pe: int | None) -> pl.LazyFrame:
    lf = scan_ops(trace).filter(~pl.col("kind").is_in(_BOOKKEEPING))
    return lf if pe is None else lf.filter(pl.col("pe") == pe)


def tcm_bytes_per_pe(trace: Trace, pe: int | None = None) -> dict[int, int]:
    """TCM bytes each PE's ops moved through its TCM port."""
    lf = _ops(trace, pe).select("op_id", "pe", "inputs", "output")
    per = (operands(lf).filter(pl.col("space").is_in(list(TCM_SPACES)))
           .join(lf.select("op_id", "pe"), on="op_id")
           .group_by("pe").agg(pl.col("nbytes").sum()).collect())
    return {int(p): int(b) for p, b in per.iter_rows()}


def send_links(topology: str, n: int, src: int, attrs: str) -> tuple[Link, ...]:
    """The links a send row (its PE ``src``, its ``attrs``) crosses: a send addressed by
    direction (``dir``) goes over its neighbour link on a ring (the ring of the PEs in use, as
    the machine builds it) or when the topology has that link; any other is routed
    (``trace.topology.route``)."""
    a = json.loads(attrs or "{}")
    dst = int(a["to"]) if "to" in a else neighbour(n, src, str(a.get("dir", "next")))
    if a.get("dir") and (topology in _RINGS or (src, dst) in links(topology, n)):
        return ((src, dst),)
    return route(topology, n, src, dst)


def link_bytes(trace: Trace, hw: HwConfig, pe: int | None = None) -> dict[Link, int]:
    """Bytes every link carried: each send's bytes on each link of its route (a ring is the
    ring of the PEs in use, as the machine builds it)."""
    n = hw.n_pe
    if hw.topology in _RINGS:
        n = int(scan_ops(trace).select(pl.col("pe").max()).collect().item() or 0) + 1
    sends = (_ops(trace, pe).filter(pl.col("engine") == Engine.LINK_TX.value)
             .group_by("pe", "attrs").agg(pl.col("nbytes").sum()).collect())
    out: dict[Link, int] = defaultdict(int)
    for src, attrs, nbytes in sends.iter_rows():
        for link in send_links(hw.topology, n, int(src), attrs):
            out[link] += int(nbytes)
    return dict(out)


def _busiest(per: Mapping[Any, int], gbps: float) -> tuple[float, Any]:
    """(ps, key) of the largest value of ``per`` at ``gbps`` (ties: the lowest key)."""
    if not per or not gbps:
        return 0.0, None
    key = min(per, key=lambda k: (-per[k], k))
    return per[key] * 1000.0 / gbps, key


def shared_metrics(trace: Trace, hw: HwConfig, hbm_bytes: int,
                   pe: int | None = None) -> dict[str, float | int | str]:
    """The shared ceilings' times (``SHARED_CEILINGS``), which PE's TCM and which link
    bind theirs (-1, "" when absent)."""
    stack = hbm_bytes * 1000.0 / hw.hbm_total_gbps if hw.hbm_total_gbps else 0.0
    tcm_ps, tcm_pe = _busiest(tcm_bytes_per_pe(trace, pe) if hw.tcm_gbps else {},
                              hw.tcm_gbps)
    link_ps, link = _busiest(link_bytes(trace, hw, pe) if hw.shared else {}, hw.link_gbps)
    return {
        "roofline_ps_hbm_stack": stack,
        "roofline_ps_tcm": tcm_ps, "roofline_tcm_pe": -1 if tcm_pe is None else int(tcm_pe),
        "roofline_ps_links": link_ps,
        "roofline_link": "" if link is None else link_name(link, hw.n_pe),
    }


__all__ = ["SHARED_CEILINGS", "link_bytes", "send_links", "shared_metrics", "tcm_bytes_per_pe"]
