"""Messages by PE index, timed twice: the chip on ahbm-v2's fields (an event loop routing each
message over ``trace/topology.route``) against ahbm-v2's PE-by-PE closed form
(``record/machine/ipcq.py``, hop by hop over the ring's ``next`` links). Every op, every send
included (each held by its injection from when it takes the message until its slowest link
is done), starts and ends at the same picosecond, also where routed messages share links.
Two differences by design: when a scope whose bytes a send still reads closes (the closed
form: at the message's arrival, the chip: once the link has read it; ADR-0596), and which op
a resolved receive's stall is charged to (the total per PE is the same)."""

from __future__ import annotations

import polars as pl
import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case
from kernbench.record.machine.chip import launch

COLUMNS = ["pe", "seq", "name", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps", "wait_ps"]


def _rows(trace: kb.Trace) -> pl.DataFrame:
    return (trace.ops.sort("pe", "seq").select(COLUMNS)
            .with_columns(pl.col("name").cast(pl.String)))


@pytest.mark.parametrize("combine, n", [("direct", 3), ("direct", 8), ("binomial", 4),
                                        ("binomial", 8)])
def test_the_chip_on_ahbm_v2_fields_delivers_indexed_messages_as_the_closed_form(
        combine, n, tmp_path, monkeypatch):
    params = {"phase": "decode", "combine": combine, "S_kv_per_rank": 512, "n_ranks": n}
    closed = kb.record(build_case("ring-attention", params), tmp_path / "c.ktrace",
                       hw="ahbm-v2")
    monkeypatch.setattr(launch, "ALWAYS", True)
    chip = kb.record(build_case("ring-attention", params), tmp_path / "p.ktrace",
                     hw="ahbm-v2")
    a, b = _rows(closed), _rows(chip)
    assert a.select("pe", "seq", "name").equals(b.select("pe", "seq", "name"))
    assert chip.t_end_ps == closed.t_end_ps
    both = a.join(b, on=["pe", "seq"], suffix="_chip")
    assert both.filter(pl.col("name") == "send").height == 3 * (n - 1)
    rest = both.filter(pl.col("name") != "scope_exit")
    for col in ("t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps"):
        assert (rest[col] == rest[f"{col}_chip"]).all(), rest.filter(
            pl.col(col) != pl.col(f"{col}_chip")).head(3)
    # the same stalls per PE (a resolved receive's stall may be charged to the op after it)
    stalls = both.group_by("pe").agg(pl.col("wait_ps").sum(), pl.col("wait_ps_chip").sum())
    assert (stalls["wait_ps"] == stalls["wait_ps_chip"]).all()
