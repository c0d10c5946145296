"""ADR-0900: a retimed trace is what recording the case on the new hardware writes, byte
for byte (op log, op stream, access arrays, contention file), wherever the op stream does
not depend on the hardware; where recording there fails, retime refuses."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import kernbench as kb
from tests.conftest import examples
from tests.record.retime.conftest import CASES, differences, hw

PRESETS = ("ahbm-v1", "ahbm-v2", "ahbm-v3")
#: fields of the timing model a sweep varies (the op stream does not depend on them) and
#: fields it may depend on (scratch, bursts, staging, slots: retime works them out again
#: or refuses as recording would fail)
FIELDS = {
    "hbm_gbps": st.sampled_from([64, 128, 300]),
    "dma_latency_ns": st.sampled_from([100, 500]),
    "dma_burst_bytes": st.sampled_from([32, 64, 256]),
    "math_lanes": st.sampled_from([64, 128]),
    "gemm_rows": st.sampled_from([64, 128]),
    "link_latency_ns": st.sampled_from([10, 1000]),
    "max_programs_per_pe": st.sampled_from([1, 2, 8]),
    "kernel_scratch_kib": st.sampled_from([192, 1024]),
    "tcm_align": st.sampled_from([16, 128]),
    "stage_kib": st.sampled_from([64, 512]),
    "engine_queue_depth": st.sampled_from([1, 8]),
}


@st.composite
def hardware(draw: st.DrawFn) -> kb.HwConfig:
    preset = draw(st.sampled_from(PRESETS))
    changed = draw(st.dictionaries(st.sampled_from(sorted(FIELDS)), st.none(), max_size=3))
    fields = {k: draw(FIELDS[k]) for k in changed}
    if preset == "ahbm-v3":
        fields.update(draw(st.fixed_dictionaries({}, optional={
            "hbm_total_gbps": st.sampled_from([100, 1000]),
            "tcm_gbps": st.sampled_from([64, 512]),
            "topology": st.sampled_from(["ring", "switch", "torus2d"])})))
    return hw(preset, **fields)


@settings(max_examples=examples(6), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(sorted(CASES)), a=hardware(), b=hardware())
def test_retime_equals_recording_the_case_on_the_new_hardware(tmp_path_factory, recorded,
                                                              case, a, b):
    source, target = recorded(case, a), recorded(case, b)
    assume(not isinstance(source, kb.KernbenchError))  # the case records on ``a``
    out = tmp_path_factory.mktemp("retimed") / "r.ktrace"
    # recording on ``b`` fails: retime refuses and writes nothing; else the same bytes
    want = "refused" if isinstance(target, kb.KernbenchError) else []
    assert _retimed(source, b, out, target) == want


def _retimed(source: kb.Trace, b: kb.HwConfig, out, target) -> object:
    """What retiming ``source`` onto ``b`` gives: "refused" (nothing written), or its
    differences with the recording ``target``."""
    try:
        got = kb.retime(source, b, out)
    except kb.RetimeError:
        return "refused" if not out.exists() else "refused, but wrote"
    return differences(got.path, target.path) if isinstance(target, kb.Trace) else "retimed"


def test_a_chain_of_retimes_v1_v2_v3_and_back_is_each_recording(tmp_path, recorded):
    """Retime of a retime: the op stream is written again each time, so the chain
    v1 -> v2 -> v3 -> v1 ends where it started, every step equal to recording there."""
    for case in ("ring-decode", "triton-matmul"):
        trace = recorded(case, hw("ahbm-v1"))
        for k, preset in enumerate(("ahbm-v2", "ahbm-v3", "ahbm-v1")):
            trace = kb.retime(trace, preset, tmp_path / f"{case}-{k}.ktrace")
            assert differences(trace.path, recorded(case, hw(preset)).path) == [], (case,
                                                                                   preset)
