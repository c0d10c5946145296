"""kb.Workload at reduced Llama shapes: every kernel of the layer recorded in order and
replayed verified on every preset, the layer's time composed from the recordings, the
decode layer bound by weight streaming, prefill bound by its GEMMs (docs/llama3-70b.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kernbench as kb
from kernbench.workload.layer import layer_steps

#: a Llama layer a sixty-fourth of 70B's width: every kernel of it, tensor parallel over 8 PEs
TINY = {"hidden": 128, "heads": 16, "kv_heads": 8, "head_dim": 16, "ffn": 256, "vocab": 512,
        "layers": 2, "batch": 2, "context": 64}
PRESETS = ("ahbm-v1", "ahbm-v2", "ahbm-v3")
LAYER = ["attn_norm", "qkv_proj", "rope", "attention", "o_proj", "o_reduce", "mlp_norm",
         "gate_up_proj", "swiglu", "down_proj", "down_reduce"]


@pytest.fixture(scope="module")
def pool():
    with kb.ReplayPool() as p:  # one warm replay worker for the three presets
        yield p


#: a layer whose weights stream for long enough that the kernels' fixed costs (DMA latency,
#: the reductions' link hops) are a few percent of it: Llama3-70B's attention, MLP a
#: third as wide
WIDE = {"hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "ffn": 8192,
        "vocab": 1024, "batch": 1, "context": 512}
#: an eighth of it: the projections still hold most of the layer (each kernel replays whole)
NARROW = {**WIDE, "hidden": 1024, "heads": 8, "ffn": 4096, "context": 256}


@pytest.fixture(scope="module", params=PRESETS)
def narrow(request, tmp_path_factory, pool):
    out = tmp_path_factory.mktemp(request.param)
    return out, kb.Workload("llama3-70b", "decode", hw=request.param, **NARROW).run(
        out, pool=pool)


def test_every_kernel_of_the_layer_replays_verified_and_checks_clean_on_each_preset(narrow):
    _, result = narrow
    body = result.to_json()
    assert [r["name"] for r in body["rows"]] == [*LAYER, "final_norm", "lm_head"]
    assert all(r["verified"] == "verified" for r in body["rows"]), body["rows"]
    assert all(r["check_ok"] for r in body["rows"])
    assert all(r["slice"] == "the whole launch" for r in body["rows"])
    assert body["verified"]


def test_the_layer_latency_is_the_sum_of_its_recorded_kernels_and_reductions(narrow):
    out, result = narrow
    ends = {p.name: json.loads((p / "manifest.json").read_text())["t_end_ps"]
            for p in out.glob("*.ktrace")}
    body = result.to_json()
    layer = [r for r in body["rows"] if r["scope"] == "layer"]
    assert sum(ends[r["trace"]] for r in layer) * 1e-12 == pytest.approx(body["layer_s"])
    reductions = [r for r in layer if r["name"].endswith("_reduce")]
    assert len(reductions) == 2
    if result.hw.link_latency_ns >= 1000:  # chip-to-chip hops: the links bind the reduction
        assert all(r["critical"] == "link_tx" for r in reductions)
    assert all(r["kernel"].startswith("direct" if result.hw.topology != "ring" else "ring")
               for r in reductions)
    head = sum(ends[r["trace"]] for r in body["rows"] if r["scope"] == "model") * 1e-12
    assert body["token_s"] == pytest.approx(80 * body["layer_s"] + head)
    assert body["tokens_per_s"] == pytest.approx(NARROW["batch"] / body["token_s"])


def _answer(hw: str = "ahbm-v3", **params) -> str:
    r = kb.Workload("llama3-70b", "decode", hw=hw, **{**TINY, **params}).run(verify=False)
    return r.table() + "\n" + json.dumps(r.to_json(), sort_keys=True) + "\n"


@pytest.fixture(scope="module")
def answer() -> str:
    """The tiny layer's table and JSON on ahbm-v3, recorded in this process."""
    return _answer()


def test_the_workload_table_is_the_same_bytes_in_another_process(answer):
    script = ("from tests.workload.test_workload import _answer; "
              "import sys; sys.stdout.write(_answer())")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True, cwd=Path(__file__).resolve().parents[2]).stdout
    assert other == answer
    assert "time per output token" in other


def test_the_tensor_parallel_split_gives_each_pe_its_share_of_heads_and_of_n():
    w = kb.Workload("llama3-70b", "decode", hw="ahbm-v3", batch=4, context=4096)
    steps = {s.name: s for s in w.steps}
    qkv, o = steps["qkv_proj"].params, steps["o_proj"].params
    assert (qkv["N"], qkv["K"], qkv["split"], qkv["ranks"]) == (10240, 8192, "columns", 8)
    assert (o["N"], o["K"], o["split"]) == (8192, 8192, "rows")
    assert steps["gate_up_proj"].params["N"] == 2 * 28672
    assert (steps["down_proj"].params["K"], steps["down_proj"].params["split"]) == (28672,
                                                                                    "rows")
    att = steps["attention"].params
    assert (att["H_q"], att["H_kv"], att["S_kv"]) == (64 * 4, 8 * 4, 4096)
    assert [s.name for s in layer_steps(w.point, w.hw)] == LAYER


@pytest.mark.parametrize("params, match", [
    ({"batch": 0}, "sizes must be positive, got batch=0"),
    ({"heads": 12}, "divisible by 8"),
    ({"bacth": 2}, "did you mean 'batch'"),
    ({"context": "long"}, "context expects int, got 'long'"),
    ({"attention": "flash"}, "attention 'flash' is not one of"),
])
def test_a_bad_workload_parameter_is_refused_naming_it(params, match):
    with pytest.raises(kb.BadInputError, match=match):
        kb.Workload("llama3-70b", "decode", hw="ahbm-v3", **params)


def _projections(body: dict) -> list[dict]:
    return [r for r in body["rows"] if r["name"].endswith("_proj")]


def test_decode_at_batch_1_is_bound_by_weight_streaming(narrow):
    body = narrow[1].to_json()
    gemms = _projections(body)
    assert all(r["binding"] in ("dma_rd", "hbm_stack") for r in gemms), gemms
    assert all(r["critical"] == "dma_rd" for r in gemms), gemms
    assert sum(r["share"] for r in gemms) > 0.5


def test_decode_at_batch_1_on_ahbm_v3_streams_at_the_hbm_floor():
    """Bound by weight streaming on ahbm-v3 too, and within 10% of its physical floor: the
    weight and KV bytes at the HBM stack's bandwidth, a closed form."""
    result = kb.Workload("llama3-70b", "decode", hw="ahbm-v3", **WIDE).run(verify=False)
    body = result.to_json()
    gemms = _projections(body)
    assert all(r["binding"] in ("dma_rd", "hbm_stack") and r["efficiency"] > 0.95
               for r in gemms), gemms
    s = WIDE
    weights = 2 * s["hidden"] * ((s["heads"] + 2 * s["kv_heads"]) * s["head_dim"]
                                 + s["heads"] * s["head_dim"] + 3 * s["ffn"])
    kv = 2 * 2 * s["batch"] * s["context"] * s["kv_heads"] * s["head_dim"]
    floor = (weights + kv) / 819.2e9
    assert body["floor_layer_s"] == pytest.approx(floor)
    assert floor < body["layer_s"] < 1.1 * floor


def test_prefill_is_bound_by_its_gemms():
    params = {**NARROW, "context": 128}
    body = kb.Workload("llama3-70b", "prefill", hw="ahbm-v3", **params).run(verify=False)\
        .to_json()
    gemms = _projections(body)
    assert sum(r["share"] for r in gemms) > 0.5
    others = [r for r in body["rows"] if r["scope"] == "layer" and r not in gemms]
    assert max(r["share"] for r in gemms) > max(r["share"] for r in others)
    assert body["ttft_s"] == pytest.approx(body["token_s"])


def test_a_run_like_one_on_other_hardware_retimes_what_it_can_and_answers_the_same(tmp_path,
                                                                                  answer):
    """Only the hardware changes: each launch whose parameters are the same (the GEMMs,
    norms, attention) is retimed from the ahbm-v2 run, the reductions (ring there, direct on
    the torus) recorded; the answer is the bytes of recording everything."""
    kb.Workload("llama3-70b", "decode", hw="ahbm-v2", **TINY).run(tmp_path / "v2",
                                                                  verify=False)
    again = kb.Workload("llama3-70b", "decode", hw="ahbm-v3", **TINY).run(
        tmp_path / "v3", verify=False, like=tmp_path / "v2")
    retimed = {r.name for r in again.rows if r.retimed}
    assert {"qkv_proj", "attention", "gate_up_proj", "lm_head"} <= retimed
    assert not retimed & {"o_reduce", "down_reduce"}
    assert again.table() + "\n" + json.dumps(again.to_json(), sort_keys=True) + "\n" == answer
