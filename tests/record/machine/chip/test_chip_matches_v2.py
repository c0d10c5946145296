"""The chip (record/machine/chip) on ahbm-v2's fields times every op exactly as ahbm-v2's
PE-by-PE closed form does: an independent implementation of the same rules (an event loop
deciding starts in time order against one closed form per op at issue). Rows are compared
per (pe, seq): the chip numbers ops in global issue order across PEs, the closed form PE
by PE."""

from __future__ import annotations

import polars as pl
import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case
from kernbench.record.machine.chip import launch

TIMING = ["pe", "program", "seq", "name", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps",
          "wait_ps", "scratch_cursor", "scope_depth", "src"]

CASES = {
    "small-ops": {"iters": 60},
    "softmax-resident": {"rows": 512, "programs": 256},  # 32 resident programs per PE
    "stream-sum": {"programs": 16, "tiles": 8},
    "gqa-decode-composite": {"S_kv": 1024, "stream": "composite"},
    "gqa-decode-lazy": {"S_kv": 1024, "T_kv": 128},
    "gqa-prefill": {"S": 256, "T_q": 16, "T_kv": 64},
    "flash-attn": {"s_kv": 512},
    "gemm": {},
    "ring-prefill": {"n_ranks": 4, "S_kv_per_rank": 256},
    "ring-decode-chain": {"phase": "decode", "combine": "chain", "S_kv_per_rank": 512},
}
_NAMES = {"softmax-resident": "softmax", "gqa-decode-composite": "gqa-decode",
          "gqa-decode-lazy": "gqa-decode", "ring-prefill": "ring-attention",
          "ring-decode-chain": "ring-attention"}


def _rows(trace: kb.Trace) -> pl.DataFrame:
    return (trace.ops.sort("pe", "seq").select(TIMING)
            .with_columns(pl.col("name").cast(pl.String), pl.col("src").cast(pl.String)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_chip_on_ahbm_v2_fields_times_every_op_as_the_closed_form(name, tmp_path,
                                                                     monkeypatch):
    case = _NAMES.get(name, name)
    closed = kb.record(build_case(case, CASES[name]), tmp_path / "closed.ktrace",
                       hw="ahbm-v2")
    monkeypatch.setattr(launch, "ALWAYS", True)
    chip = kb.record(build_case(case, CASES[name]), tmp_path / "chip.ktrace", hw="ahbm-v2")
    a, b = _rows(closed), _rows(chip)
    assert len(a) > 20
    assert a.equals(b), a.join(b, on=["pe", "seq"], suffix="_chip").filter(
        pl.col("t_start_ps") != pl.col("t_start_ps_chip")).head(5)
    assert chip.manifest["t_end_ps"] == closed.manifest["t_end_ps"]
    assert chip.manifest["programs_per_pe"] == closed.manifest["programs_per_pe"]
