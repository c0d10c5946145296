"""The software-pipelined attention kernels (docs/adr/0530): ``schedule="pipelined"`` computes
what the serial kernel computes, replays verified against numpy and passes ``check`` on both
presets; serial stays the default."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench.analyze import check
from kernbench.kernels.registry import build_case

#: small shapes that still cross query tiles, diagonal tiles and (S=200) short tail tiles
PREFILL = [{"S": 256, "T_kv": 64, "H_q": 16, "H_kv": 2},
           {"S": 200, "T_kv": 64, "H_q": 8, "H_kv": 1}]
RING = [{"n_ranks": 3, "S_kv_per_rank": 128, "C": 32},
        {"n_ranks": 4, "S_kv_per_rank": 64, "causal": True, "T_q": 16, "layout": "striped"}]
HW = ["ahbm-v1", "ahbm-v2"]


def _verified(tmp_path, name, params, hw, pool):
    trace = kb.record(build_case(name, params), tmp_path / f"{hw}.ktrace", hw=hw)
    res = kb.replay(trace.path, pool=pool)
    assert res.verified and res.verdict["outputs"]["o"]["checked"], res.verdict
    assert check(trace).exit_code == 0, check(trace).to_text()
    return trace, res.outputs["o"]


@pytest.mark.parametrize("hw", HW)
def test_pipelined_prefill_replays_verified_with_short_tail_tiles(tmp_path, hw, kb_replay_pool):
    _verified(tmp_path, "gqa-prefill", {**PREFILL[1], "schedule": "pipelined"}, hw, kb_replay_pool)


def test_pipelined_prefill_verified_on_v2_is_the_serial_prefill_sooner(tmp_path, kb_replay_pool):
    # verified: the same outputs as the numpy reference the serial kernel is verified against
    piped, _ = _verified(tmp_path / "p", "gqa-prefill", {**PREFILL[0], "schedule": "pipelined"},
                         "ahbm-v2", kb_replay_pool)
    serial = kb.record(build_case("gqa-prefill", PREFILL[0]), tmp_path / "s.ktrace",
                       hw="ahbm-v2")
    assert piped.manifest["kernel"].endswith("gqa:gqa_prefill_pipelined")
    assert serial.manifest["kernel"].endswith("gqa:gqa_prefill")
    assert piped.t_end_ps < serial.t_end_ps


@pytest.mark.parametrize(("hw", "params"), [("ahbm-v1", RING[1]), ("ahbm-v2", RING[1]),
                                            ("ahbm-v2", RING[0])],
                         ids=["causal-v1", "causal-v2", "full-v2"])
def test_pipelined_ring_prefill_replays_verified(tmp_path, hw, params, kb_replay_pool):
    _verified(tmp_path, "ring-attention", {**params, "schedule": "pipelined"}, hw, kb_replay_pool)


def test_pipelined_prefill_issues_the_next_scores_gemm_before_this_tiles_softmax(tmp_path):
    trace = kb.record(build_case("gqa-prefill", {**PREFILL[0], "schedule": "pipelined"}),
                      tmp_path / "p.ktrace", hw="ahbm-v1")
    ops = trace.ops.filter(trace.ops["pe"] == 0).sort("seq")
    names = ops["name"].cast(str).to_list()
    dots = [i for i, n in enumerate(names) if n == "dot"]
    exps = [i for i, n in enumerate(names) if n == "exp"]
    # per step: Q·Kᵀ of the next step, then this step's exps, then P·V; the first step's
    # scores come before the loop, so two dots precede the first exp
    assert sum(d < exps[0] for d in dots) == 2


@pytest.mark.parametrize(("case", "extra"), [("gqa-prefill", {}),
                                             ("ring-attention", {"n_ranks": 2})])
def test_an_unknown_schedule_is_bad_input_naming_it(case, extra):
    with pytest.raises(kb.BadInputError, match="schedule 'overlapped'"):
        build_case(case, {**extra, "schedule": "overlapped"})


def test_serial_stays_the_default_schedule():
    assert build_case("gqa-prefill", {"S": 64}).kernel.__name__ == "gqa_prefill"
    assert build_case("ring-attention", {"n_ranks": 2}).kernel.__name__ == "ring_prefill"
