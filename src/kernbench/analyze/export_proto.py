"""The native Perfetto protobuf format of an exported timeline (``kernbench export -o
T.pftrace``), built with the ``perfetto`` package's trace builder (``kernbench[perfetto]``).

The same timeline as the JSON export (``export.timeline``: integer-ns spans, one counter
sample per timestamp, a stall track per PE, load -> first-consumer flows), as TrackEvent
packets on one sequence: a process track per PE, a child track per engine and for stalls, a
counter track for scratch; event names interned. Packets are written sorted by time (ends
before begins at equal times), so a track's slices nest exactly as in the JSON.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import polars as pl

from kernbench.errors import BadInputError

SEQ = 1  # the one trusted_packet_sequence_id
CLEARED, NEEDS_STATE = 1, 2  # TracePacket.SequenceFlags
# event order at one timestamp: slice ends, counters, zero-length slices, slice begins
END, COUNTER, ZERO, BEGIN = 0, 1, 2, 3


def protos() -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder
    except ImportError:
        raise BadInputError("the .pftrace format needs the perfetto package: "
                            "pip install 'kernbench[perfetto]' (or write .json)") from None
    return pb, StreamingTraceProtoBuilder


def _uuid(pe: int, tid: int) -> int:
    return (pe + 1) << 20 | tid  # tid 0: the process track; tid 2**20 - 1: scratch counter


COUNTER_TID = (1 << 20) - 1


class _Writer:
    """Packets streamed to a file as they are made (memory flat in the number of events)."""

    def __init__(self, builder: Any) -> None:
        self.builder, self.pending, self.count = builder, None, 0

    def add_packet(self) -> Any:
        self.flush()
        self.pending = self.builder.create_packet()
        return self.pending

    def flush(self) -> None:
        if self.pending is not None:
            self.builder.write_packet(self.pending)
            self.count += 1
            self.pending = None


def _tracks(builder: _Writer, tl: Any) -> None:
    """One process track per PE with its scratch counter, then every engine/queue track."""
    for pe in tl.pes:
        p = builder.add_packet()
        p.track_descriptor.uuid = _uuid(pe, 0)
        p.track_descriptor.process.pid = pe + 1
        p.track_descriptor.process.process_name = f"PE {pe}"
        p = builder.add_packet()
        p.track_descriptor.uuid = _uuid(pe, COUNTER_TID)
        p.track_descriptor.parent_uuid = _uuid(pe, 0)
        p.track_descriptor.name = "scratch"
        p.track_descriptor.counter.unit_name = "bytes"
    for t in tl.tracks.iter_rows(named=True):
        p = builder.add_packet()
        p.track_descriptor.uuid = _uuid(t["pe"], t["tid"])
        p.track_descriptor.parent_uuid = _uuid(t["pe"], 0)
        p.track_descriptor.name = t["track"]
        p.track_descriptor.sibling_order_rank = t["tid"]


def _flows(tl: Any) -> tuple[dict[int, int], dict[int, list[int]]]:
    """The op ids that start a flow, and per consumer op the loads whose flows it ends."""
    flows_out = dict(zip(tl.flows["id"].to_list(), tl.flows["id"].to_list(), strict=True))
    flows_in: dict[int, list[int]] = {}
    for load, consumer in tl.flows.select("id", "consumer").iter_rows():
        flows_in.setdefault(consumer, []).append(load)
    return flows_out, flows_in


def _events(tl: Any) -> pl.DataFrame:
    """Every slice begin/end and counter value, in the order Perfetto must see them."""
    spans = tl.spans.with_columns(track=pl.col("pe") * (1 << 20) + (1 << 20) + pl.col("tid"),
                                  zero=pl.col("end_ns") == pl.col("start_ns"))
    cols = ["ts", "order", "k", "track", "name", "op_id", "value"]
    zero = spans.filter("zero").with_row_index("k")
    events = pl.concat([
        spans.filter(~pl.col("zero")).select(ts="end_ns", order=pl.lit(END), k=pl.lit(0),
                                             track="track", name="name", op_id="op_id",
                                             value=pl.lit(0)),
        tl.counters.select(ts="ts_ns", order=pl.lit(COUNTER), k=pl.lit(0),
                           track=pl.col("pe") * (1 << 20) + (1 << 20) + COUNTER_TID,
                           name=pl.lit(""), op_id=pl.lit(-1), value="bytes"),
        zero.select(ts="start_ns", order=pl.lit(ZERO), k=2 * pl.col("k").cast(pl.Int64),
                    track="track", name="name", op_id="op_id", value=pl.lit(0)),
        zero.select(ts="end_ns", order=pl.lit(ZERO), k=2 * pl.col("k").cast(pl.Int64) + 1,
                    track="track", name="name", op_id="op_id", value=pl.lit(0)),
        spans.filter(~pl.col("zero")).select(ts="start_ns", order=pl.lit(BEGIN), k=pl.lit(0),
                                             track="track", name="name", op_id="op_id",
                                             value=pl.lit(0)),
    ], how="vertical_relaxed").select(cols)
    # at one timestamp: slice ends, counters, zero-length slices (begin, end), slice begins
    return events.sort("ts", "order", "k", maintain_order=True)


def _intern(builder: _Writer, names: dict[str, int]) -> None:
    """The packet that clears the sequence state and interns every slice name."""
    p = builder.add_packet()
    p.trusted_packet_sequence_id = SEQ
    p.sequence_flags = CLEARED
    for name, iid in names.items():
        entry = p.interned_data.event_names.add()
        entry.iid, entry.name = iid, name


def _write_events(builder: _Writer, pb: Any, events: pl.DataFrame, names: dict[str, int],
                  flows: tuple[dict[int, int], dict[int, list[int]]]) -> int:
    """One packet per event; returns the slices begun."""
    track_event = pb.TrackEvent
    flows_out, flows_in = flows
    n_slices = 0
    for ts, order, k, track, name, op_id, value in events.iter_rows():
        p = builder.add_packet()
        p.timestamp = ts
        p.trusted_packet_sequence_id = SEQ
        p.sequence_flags = NEEDS_STATE
        ev = p.track_event
        ev.track_uuid = track
        if order == COUNTER:
            ev.type = track_event.TYPE_COUNTER
            ev.counter_value = value
        elif order == END or (order == ZERO and k % 2):
            ev.type = track_event.TYPE_SLICE_END
        else:
            n_slices += 1
            ev.type = track_event.TYPE_SLICE_BEGIN
            ev.name_iid = names[name]
            if name != "stall":
                if op_id in flows_out:
                    ev.flow_ids.append(op_id)
                for load in flows_in.get(op_id, ()):
                    ev.terminating_flow_ids.append(load)
    return n_slices


def export_proto(tl: Any, out: BinaryIO) -> tuple[int, int]:
    """Stream a ``Timeline`` to ``out`` as Perfetto protobuf: (packets, slices)."""
    pb, builder_cls = protos()
    builder = _Writer(builder_cls(out))
    _tracks(builder, tl)
    names = {n: i for i, n in enumerate(sorted(tl.spans["name"].unique().to_list()), 1)}
    flows = _flows(tl)
    events = _events(tl)
    _intern(builder, names)
    n_slices = _write_events(builder, pb, events, names, flows)
    builder.flush()
    return builder.count, n_slices
