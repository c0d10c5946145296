"""The ipcq space's layout (``trace/ipcq_slots.py``, ADR-0750): two direction regions, then one
per source PE; the validator measures what each PE's space spans (what replay allocates) and
refuses an operand past the layout, so a hand-edited trace cannot make replay map a huge
space."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench.errors import TraceFormatError
from kernbench.trace.hw import HwConfig
from kernbench.trace.ipcq_slots import capacity, directions_bytes
from tests.conftest import rewrite_ops
from tests.replay.test_lazy import gather_case

SLOT = 4096 * 1024


def test_the_layout_is_two_direction_regions_then_one_per_source_pe() -> None:
    assert directions_bytes(2, SLOT) == 4 * SLOT
    assert capacity(64, 2, SLOT) == 66 * 2 * SLOT  # 528 MiB at 64 PEs and 4 MiB slots


def test_the_validator_measures_what_each_pes_slots_span(tmp_path) -> None:
    by_index = kb.record(gather_case(4), tmp_path / "g.ktrace", hw=HwConfig(n_pe=4))
    assert by_index.validation.ipcq_bytes == {0: (2 + 3) * 2 * SLOT + 64}
    ring = kb.record(kb.build_case("ring-attention", {"n_ranks": 4, "S_kv_per_rank": 64,
                                                      "phase": "decode"}),
                     tmp_path / "r.ktrace")
    spans = ring.validation.ipcq_bytes  # messages from a direction: inside its regions
    assert spans and all(0 < b <= directions_bytes(2, SLOT) for b in spans.values())


@pytest.mark.parametrize("addr", [(2 + 4) * 2 * SLOT, 1 << 50])
def test_an_ipcq_operand_past_the_layout_is_refused(tmp_path, addr) -> None:
    trace = kb.record(gather_case(4), tmp_path / "g.ktrace", hw=HwConfig(n_pe=4))

    def edit(rows):
        send = next(r for r in rows if r["name"] == "send")
        send["output"] = dict(send["output"], addr=addr)

    rewrite_ops(trace.path, edit)
    found = kb.Trace.open(trace.path, strict=False).validation.rule("schema")
    assert found.height == 1
    assert found["message"].str.contains(
        rf"reads or writes ipcq@pe0 \[{addr}, \+64 bytes\), outside the PE's ipcq space "
        rf"\({capacity(4, 2, SLOT)} bytes").all()
    with pytest.raises(TraceFormatError, match="invalid trace"):
        kb.Trace.open(trace.path).ops  # noqa: B018
