"""Perfetto export: valid JSON, one track per engine, a scratch counter, no overlaps."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from kernbench.analyze import export_perfetto
from kernbench.errors import BadInputError
from kernbench.trace import Trace


def _load(trace: Path, out: Path) -> list[dict]:
    report = export_perfetto(trace, out)
    doc = json.loads(out.read_text())
    assert report.n_events == len(doc["traceEvents"]) and report.exit_code == 0
    return doc["traceEvents"]


@pytest.mark.parametrize("case,params", [("gemm", {"BN": 64}), ("scale-exp", {})])
def test_tracks_spans_and_counter(traces, tmp_path: Path, case: str, params: dict) -> None:
    path = traces(case, **params)
    events = _load(path, tmp_path / "t.json")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X" and e["cat"] != "stall"]
    ops = Trace.open(path).ops
    assert len(spans) == ops.filter(ops["busy_ps"] > 0).height
    # each X event sits on the track named for its op's engine, on its op's PE
    by_id = {r["op_id"]: r for r in ops.iter_rows(named=True)}
    for e in spans:
        op = by_id[e["args"]["op_id"]]
        assert (e["pid"], names[(e["pid"], e["tid"])]) == (op["pe"], op["engine"])
        assert round(e["dur"] * 1000) == (op["t_start_ps"] + op["busy_ps"]) // 1000 \
            - op["t_start_ps"] // 1000
        assert e["name"] == op["name"] and round(e["ts"] * 1000) == op["t_start_ps"] // 1000
    # one track per engine per PE: track names are unique within a process
    per_pe = defaultdict(list)
    for (pid, _), name in names.items():
        per_pe[pid].append(name)
    assert all(len(v) == len(set(v)) for v in per_pe.values())
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and {e["name"] for e in counters} == {"scratch"}
    assert max(e["args"]["bytes"] for e in counters) == Trace.open(path).manifest[
        "scratch_peak_bytes"]
    assert {e["pid"] for e in events if e["name"] == "process_name"} == set(ops["pe"].unique())


def test_no_two_spans_on_one_track_overlap(traces, tmp_path: Path) -> None:
    events = _load(traces("gemm", BN=64), tmp_path / "t.json")
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":  # back to integer ps, so float rounding cannot hide an overlap
            tracks[(e["pid"], e["tid"])].append((round(e["ts"] * 1e6), round(e["dur"] * 1e6)))
    assert len(tracks) >= 3  # dma_rd, dma_wr, gemm on each PE
    for spans in tracks.values():
        spans.sort()
        for (t0, d0), (t1, _) in zip(spans, spans[1:], strict=False):
            assert t0 + d0 <= t1


def test_unwritable_output(traces, tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="cannot write"):
        export_perfetto(traces("scale-exp"), tmp_path / "no" / "such" / "dir.json")
