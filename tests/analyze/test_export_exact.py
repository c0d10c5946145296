"""The Perfetto export is exact: integer-ns spans that never partially overlap on a track,
one counter sample per timestamp, a stall track per PE, load -> first-consumer flows; checked
on every golden trace, in JSON and in the native protobuf format."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import export_perfetto
from kernbench.analyze.frames import load_ops, operands

GOLDEN = sorted((Path(__file__).resolve().parents[2] / "traces").glob("*.ktrace"))


def _ns(us: float) -> int:
    """Integer nanoseconds of a microsecond value, asserting it is one."""
    n = round(us * 1000)
    assert abs(us * 1000 - n) < 1e-6, f"{us} us is not a whole number of ns"
    return n


def _sequential(intervals: list[tuple[int, int]]) -> None:
    """Sorted by start, each interval starts at or after the previous one ends."""
    intervals = sorted(intervals)
    for (s0, e0), (s1, e1) in zip(intervals, intervals[1:], strict=False):
        assert s0 <= e0 and s1 <= e1
        assert s1 >= e0, f"[{s0}, {e0}) and [{s1}, {e1}) partially overlap"


@pytest.fixture(scope="module", params=GOLDEN, ids=lambda p: p.stem)
def exported(request, tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("export") / f"{request.param.stem}.json"
    export_perfetto(request.param, out)
    return request.param, json.loads(out.read_text())["traceEvents"]


def test_spans_are_whole_ns_and_never_overlap_on_a_track(exported):
    _, events = exported
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            start, dur = _ns(e["ts"]), _ns(e["dur"])
            tracks[(e["pid"], e["tid"])].append((start, start + dur))
    assert tracks
    for spans in tracks.values():
        _sequential(spans)


def test_spans_are_the_floored_ps_times_of_their_ops(exported):
    path, events = exported
    ops = {r["op_id"]: r for r in kb.Trace.open(path).ops.iter_rows(named=True)}
    spans = [e for e in events if e["ph"] == "X" and e["cat"] != "stall"]
    # one span per op that held an engine (busy_ps > 0), no other
    assert sorted(e["args"]["op_id"] for e in spans) == sorted(
        i for i, r in ops.items() if r["busy_ps"] > 0)
    for e in spans:
        op = ops[e["args"]["op_id"]]
        assert _ns(e["ts"]) == op["t_start_ps"] // 1000
        assert _ns(e["ts"]) + _ns(e["dur"]) == (op["t_start_ps"] + op["busy_ps"]) // 1000


def test_one_counter_sample_per_timestamp_ending_at_the_cursor(exported):
    path, events = exported
    seen = set()
    for e in (e for e in events if e["ph"] == "C"):
        key = (e["pid"], e["name"], _ns(e["ts"]))
        assert key not in seen, f"two samples of {key}"
        seen.add(key)
    ops = kb.Trace.open(path).ops
    last = ops.sort("op_id").group_by("pe").agg(pl.col("scratch_cursor").last())
    assert {pe for pe, _, _ in seen} == set(last["pe"].to_list())  # a counter track per PE
    for pe, cursor in last.iter_rows():
        final = max((e for e in events if e["ph"] == "C" and e["pid"] == pe),
                    key=lambda e: e["ts"])
        assert final["args"]["bytes"] == cursor


def test_a_stall_track_per_pe_holds_the_kernel_waits(exported):
    path, events = exported
    m = kb.analyze.metrics(path)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["name"] == "thread_name"}
    stalls = [e for e in events if e["ph"] == "X" and e["cat"] == "stall"]
    ops = kb.Trace.open(path).ops.filter(pl.col("parent").is_null() & (pl.col("wait_ps") > 0))
    assert {e["pid"] for e in stalls} == set(ops["pe"].unique().to_list())
    all_pes = set(kb.Trace.open(path).ops["pe"].unique().to_list())
    assert {pid for (pid, _), n in names.items() if n == "stall"} == all_pes
    assert all(names[(e["pid"], e["tid"])] == "stall" for e in stalls)
    assert sum(e["args"]["wait_ps"] for e in stalls) == m["stall_ps"]
    total_ns = sum(_ns(e["dur"]) for e in stalls)
    assert abs(total_ns * 1000 - m["stall_ps"]) <= 1000 * len(stalls)  # floor: < 1 ns each


def test_flows_run_from_each_load_to_the_first_op_reading_its_bytes(exported):
    path, events = exported
    trace = kb.Trace.open(path)
    ops = load_ops(trace)
    spans = defaultdict(list)
    for e in events:
        if e["ph"] == "X" and e["cat"] != "stall":
            spans[(e["pid"], e["tid"])].append(e)

    def enclosing(e, own=None):
        t = _ns(e["ts"])
        hits = [s for s in spans[(e["pid"], e["tid"])]
                if _ns(s["ts"]) <= t <= _ns(s["ts"]) + _ns(s["dur"])]
        if len(hits) > 1 and own is not None:  # loads of a few bytes share a nanosecond
            hits = [s for s in hits if s["args"]["op_id"] == own] or hits
        assert len(hits) == 1, f"flow end at {t} ns is in {len(hits)} spans"
        return hits[0]["args"]["op_id"]

    starts = {e["id"]: enclosing(e, e["id"]) for e in events if e["ph"] == "s"}
    ends = {e["id"]: enclosing(e) for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    parents = ops.filter(pl.col("kind") == "composite")["op_id"]
    opnd = operands(ops).filter((pl.col("space") != "hbm")
                                & ~pl.col("op_id").is_in(parents.to_list())).collect()
    by_op = {(r["op_id"], r["role"]): r for r in opnd.iter_rows(named=True)}
    reads = opnd.filter(pl.col("role") == "in")
    names = dict(zip(ops["op_id"].to_list(), ops["name"].to_list(), strict=True))
    for fid, load in starts.items():
        assert load == fid and names[load] == "dma_read"
        out = by_op[(load, "out")]
        same = reads.filter((pl.col("space") == out["space"]) & (pl.col("addr") == out["addr"])
                            & (pl.col("mem_pe") == out["mem_pe"]) & (pl.col("op_id") > load))
        assert ends[fid] == same["op_id"].min()  # the first later reader of those bytes
    n_loads = sum(1 for n in names.values() if n == "dma_read")
    assert n_loads == 0 or starts, "no load got an arrow"


@pytest.mark.parametrize("path", GOLDEN[:4] + [p for p in GOLDEN if "ring" in p.stem][:1],
                         ids=lambda p: p.stem)
def test_protobuf_export_holds_the_same_timeline(path, tmp_path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    rep = export_perfetto(path, tmp_path / "t.pftrace")
    doc = json.loads(export_perfetto(path, tmp_path / "t.json") and
                     (tmp_path / "t.json").read_text())["traceEvents"]
    trace = Trace()
    trace.ParseFromString((tmp_path / "t.pftrace").read_bytes())
    assert rep.format == "protobuf" and rep.n_bytes == (tmp_path / "t.pftrace").stat().st_size
    open_: dict[int, int] = {}
    slices, counters = defaultdict(list), defaultdict(list)
    flows_out, flows_in = set(), set()
    last_ts = 0
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        ev = p.track_event
        assert p.timestamp >= last_ts  # written in time order
        last_ts = p.timestamp
        if ev.type == TrackEvent.TYPE_SLICE_BEGIN:
            assert ev.track_uuid not in open_, "a slice began inside another on one track"
            open_[ev.track_uuid] = p.timestamp
            flows_out.update(ev.flow_ids)
            flows_in.update(ev.terminating_flow_ids)
        elif ev.type == TrackEvent.TYPE_SLICE_END:
            slices[ev.track_uuid].append((open_.pop(ev.track_uuid), p.timestamp))
        elif ev.type == TrackEvent.TYPE_COUNTER:
            counters[ev.track_uuid].append(p.timestamp)
    assert not open_
    json_spans = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in doc
                        if e["ph"] == "X")
    assert sorted(s for v in slices.values() for s in v) == json_spans
    for v in counters.values():
        assert len(v) == len(set(v))
    assert sum(map(len, counters.values())) == sum(e["ph"] == "C" for e in doc)
    json_flows = {e["id"] for e in doc if e["ph"] == "s"}
    assert flows_out == flows_in == json_flows


def test_export_cli_writes_protobuf_by_suffix(tmp_path):
    from click.testing import CliRunner

    from kernbench.cli import main

    out = tmp_path / "t.pftrace"
    result = CliRunner().invoke(main, ["export", str(GOLDEN[0]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "protobuf" in result.output and f"{out.stat().st_size:,} bytes" in result.output


def test_protobuf_without_the_perfetto_package_is_one_line_and_writes_nothing(
        tmp_path, monkeypatch):
    import sys

    from click.testing import CliRunner

    from kernbench.cli import main

    monkeypatch.setitem(sys.modules, "perfetto.trace_builder.proto_builder", None)
    out = tmp_path / "t.pftrace"
    result = CliRunner().invoke(main, ["export", str(GOLDEN[0]), "-o", str(out)])
    assert result.exit_code == 2 and "kernbench[perfetto]" in result.output
    assert result.output.count("\n") == 1 and not out.exists()
