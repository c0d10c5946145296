"""The roofline's shared ceilings (ADR-0742): the HBM stack, each PE's TCM, each link; and
``efficiency`` against the one that binds. Checked against byte counts taken from the op log
independently, on recorded traces whose manifest hardware has the shared part set; on
ahbm-v1 and ahbm-v2 nothing but the new keys exists."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze.metrics import ENGINES, ceilings
from kernbench.analyze.shared_ceilings import send_links
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.traffic import tcm_bytes
from kernbench.trace.hw import HwConfig

GOLDEN = Path(__file__).resolve().parents[2] / "traces"
NEW_KEYS = {"roofline_ps_hbm_stack", "roofline_ps_tcm", "roofline_tcm_pe", "roofline_ps_links",
            "roofline_link", "efficiency_bound", "efficiency_bound_ps"}


def _with_hw(edit_trace: Callable[..., Path], name: str, **fields: object) -> kb.Trace:
    src = GOLDEN / f"{name}.ktrace"
    hw = {**json.loads((src / "manifest.json").read_text())["hw"], **fields}
    return kb.Trace.open(edit_trace(src, lambda df: df, hw=hw))


@pytest.mark.parametrize("name", ["ring-decode.ktrace", "v2/ring-decode.ktrace",
                                  "v2/gqa-decode.ktrace", "gemm.ktrace"])
def test_without_shared_parts_efficiency_is_against_the_busiest_engine(name: str) -> None:
    m = kb.analyze.metrics(GOLDEN / name)
    assert NEW_KEYS <= set(m)
    assert m["roofline_ps_hbm_stack"] == m["roofline_ps_tcm"] == m["roofline_ps_links"] == 0.0
    assert (m["roofline_tcm_pe"], m["roofline_link"]) == (-1, "")
    assert m["efficiency"] == m["max_engine_busy_ps"] / m["latency_ps"]
    assert m["efficiency_bound"] == m["bottleneck_engine"]
    assert m["roofline_bound"] in {str(e) for e in ENGINES}
    assert [c.name for c in ceilings(m)] == ["hbm", "gemm", "math", "link"]


def _hbm_bytes(trace: kb.Trace) -> int:
    dma = trace.ops.filter(pl.col("engine").cast(pl.String).is_in(["dma_rd", "dma_wr"])
                           & (pl.col("kind").cast(pl.String) != "composite"))
    return int(dma["nbytes"].sum())


def test_efficiency_is_against_the_hbm_stack_when_it_binds(edit_trace) -> None:
    # gqa-decode streams its KV cache: 16 GB/s for the whole stack binds over every engine
    trace = _with_hw(edit_trace, "gqa-decode", hbm_total_gbps=16)
    m = kb.analyze.metrics(trace)
    stack_ps = _hbm_bytes(trace) * 1000.0 / 16
    assert m["roofline_ps_hbm_stack"] == pytest.approx(stack_ps, rel=1e-12)
    assert stack_ps > m["max_engine_busy_ps"]
    assert m["efficiency_bound"] == "hbm_stack" and m["efficiency_bound_ps"] == stack_ps
    assert m["efficiency"] == pytest.approx(stack_ps / m["latency_ps"], rel=1e-12)
    assert m["roofline_bound"] == "hbm_stack" and m["roofline_ps"] == stack_ps
    stack = next(c for c in ceilings(m) if c.name == "hbm_stack")
    assert stack.binds and [c.name for c in ceilings(m) if c.binds] == ["hbm_stack"]
    # a stack wider than the busiest engine needs leaves efficiency where it was
    wide = kb.analyze.metrics(_with_hw(edit_trace, "gqa-decode", hbm_total_gbps=1e6))
    assert wide["efficiency"] == wide["max_engine_busy_ps"] / wide["latency_ps"]
    assert wide["efficiency_bound"] == wide["bottleneck_engine"]
    assert 0 < wide["roofline_ps_hbm_stack"] < wide["max_engine_busy_ps"]


def test_the_tcm_ceiling_is_the_busiest_pes_tcm_bytes_at_tcm_gbps(edit_trace) -> None:
    trace = _with_hw(edit_trace, "scale-exp", tcm_gbps=2)
    per_pe: dict[int, int] = {}
    for r in trace.ops.iter_rows(named=True):  # the traffic rule, op by op
        if str(r["kind"]) in ("composite", "scope"):
            continue
        opnds = [*r["inputs"], *([r["output"]] if r["output"] else [])]
        moved = tcm_bytes((o["space"], DTYPES[o["dtype"]].itemsize * _elements(o["shape"]))
                          for o in opnds)
        per_pe[r["pe"]] = per_pe.get(r["pe"], 0) + moved
    busiest = max(per_pe, key=lambda p: (per_pe[p], -p))
    m = kb.analyze.metrics(trace)
    assert m["roofline_tcm_pe"] == busiest
    assert m["roofline_ps_tcm"] == pytest.approx(per_pe[busiest] * 1000.0 / 2, rel=1e-12)
    assert m["efficiency_bound"] == "tcm"  # 2 GB/s binds
    assert m["efficiency"] == pytest.approx(m["roofline_ps_tcm"] / m["latency_ps"])


def _elements(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def test_the_link_ceiling_is_the_busiest_link_of_the_sends_routes(edit_trace) -> None:
    # ring-decode: PE 1 sends 4160 bytes to PE 0; over a switch both of its links carry them
    trace = _with_hw(edit_trace, "ring-decode", topology="switch", link_gbps=0.5)
    sent = trace.ops.filter(pl.col("engine").cast(pl.String) == "link_tx")
    assert set(sent["pe"]) == {1} and int(sent["nbytes"].sum()) == 4160
    m = kb.analyze.metrics(trace)
    assert m["roofline_link"] == "pe1->switch"  # tie with switch->pe0: the lower link
    assert m["roofline_ps_links"] == pytest.approx(4160 * 1000.0 / 0.5, rel=1e-12)
    assert m["efficiency_bound"] == "links"
    assert m["efficiency"] == pytest.approx(m["roofline_ps_links"] / m["latency_ps"])


def test_a_send_by_direction_takes_its_neighbour_link_and_one_by_index_is_routed() -> None:
    prev = '{"dir":"prev","to":0}'
    assert send_links("ring", 8, 1, prev) == ((1, 0),)
    # "next" of PE 3 on the ring of the 4 PEs in use is PE 0: still its neighbour link
    assert send_links("ring", 8, 3, '{"dir":"next","to":0}') == ((3, 0),)
    assert send_links("ring", 8, 1, '{"to":0}') == tuple((p, (p + 1) % 8) for p in range(1, 8))
    assert send_links("switch", 8, 1, prev) == ((1, 8), (8, 0))
    assert send_links("mesh2d", 8, 3, '{"dir":"next","to":4}') == ((3, 2), (2, 1), (1, 0),
                                                                   (0, 4))
    assert HwConfig(topology="switch").shared
