"""ADR-0900: everything works on a retimed trace: replay (verified), check (the race
detector on the new timing), report (it names the trace it was retimed from), diff against
the original, plot and export."""

from __future__ import annotations

import json

import kernbench as kb
from kernbench import tl
from kernbench.analyze import check, diff, report
from tests.record.retime.conftest import hw


@kb.kernel
def overwrite_in_flight(x, y, *, n: int):
    """Program 0 reads ``x`` and tells program 1, which overwrites ``x``: ordered by the
    message, but on a fast link the write lands while the read is still in flight."""
    if tl.program_id(0) == 0:
        a = tl.load(x, (n,), tl.float32)
        tl.send("next", tl.full((16,), 1.0, tl.float32))
        tl.store(y, a)
    else:
        tl.store(x, tl.recv("prev", (16,), tl.float32))


def test_a_retimed_trace_replays_verified_checks_clean_and_reports_its_origin(tmp_path):
    case = kb.build_case("gqa-prefill", {"S": 128, "T_q": 16, "T_kv": 64, "H_q": 8,
                                         "H_kv": 1})
    original = kb.record(case, tmp_path / "p1.ktrace", hw="ahbm-v1")
    retimed = kb.retime(original, "ahbm-v3", tmp_path / "p3.ktrace")
    assert kb.replay(retimed.path, in_process=True).ok
    assert check(retimed).exit_code == 0
    rep = report(retimed)
    assert rep.retimed_from == {"trace": str(original.path.absolute()), "hw": "ahbm-v1",
                                "t_end_ps": original.t_end_ps,
                                "ops_sha256": original.manifest["files"]["ops.parquet"]}
    assert f"retimed from {original.path.absolute()} (hw ahbm-v1" in rep.to_text()
    assert json.loads(rep.to_json())["retimed_from"]["hw"] == "ahbm-v1"
    assert report(original).retimed_from is None
    d = diff(original, retimed)  # what the hardware change buys: same ops, new times
    assert d.first_structural is None
    assert d.to_dict()["metrics"]["latency_ps"]["b"] == retimed.t_end_ps != original.t_end_ps
    lines = {r["src"]: r for r in d.to_dict()["by_line"]}  # and by source line
    assert set(lines) == set(original.ops["src"].cast(str))
    assert sum(r["d_busy_ps"] + r["d_wait_ps"] for r in lines.values()) != 0
    assert "by source line" in d.to_text()


def test_plot_and_export_draw_a_retimed_trace(tmp_path, recorded):
    from kernbench.analyze.export import export_perfetto
    from kernbench.plot import plot

    original = recorded("softmax", hw("ahbm-v1"))
    retimed = kb.retime(original, "ahbm-v2", tmp_path / "r.ktrace")
    plot(retimed.path, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0
    events = []  # the timeline of the retimed trace is the recording's on that hardware
    for t in (retimed, recorded("softmax", hw("ahbm-v2"))):
        export_perfetto(t, tmp_path / f"{t.path.stem}.json")
        events.append(json.loads((tmp_path / f"{t.path.stem}.json").read_text())["traceEvents"])
    assert events[0] == events[1] and any(e.get("ph") == "X" for e in events[0])


def test_a_race_that_only_the_new_timing_has_is_reported_on_the_retimed_trace(tmp_path):
    case = kb.Case(name="overwrite", kernel=overwrite_in_flight, grid=(2,),
                   tensors={"x": kb.tensor((16384,), "float32", init=kb.randn(seed=0),
                                           role="inout"),
                            "y": kb.tensor((16384,), "float32", role="output")},
                   params={"n": 16384})
    original = kb.record(case, tmp_path / "o.ktrace", hw="ahbm-v1")
    assert check(original).exit_code == 0  # the message arrives after the read ended
    retimed = kb.retime(original, hw("ahbm-v1", link_latency_ns=10), tmp_path / "r.ktrace")
    found = check(retimed)
    assert found.exit_code == 1
    assert "writes hbm@pe0 [0, 64) at" in found.to_text()
    assert "while op 0 is reading it" in found.to_text()
