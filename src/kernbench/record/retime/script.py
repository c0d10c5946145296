"""A trace's op stream, program by program: what ``retime`` issues again.

Each program's script is its rows the kernel issued (a composite's children, and the
receives a posted ``recv_async`` resolves, are the machine's: it makes them again) merged
with the events of ``stream.parquet`` in the order they happened: an event noted at ``seq``
comes before the program's first row of a higher ``seq`` (``record/rows/stream.py``).
Operands are decoded once per distinct operand, as tuples ``(space, pe, addr, shape,
dtype, transposed)`` (``TensorHandle.operand``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from kernbench.errors import TraceFormatError
from kernbench.record.rows.stream import RECV_ASYNC, WORK
from kernbench.schemas.ops import Op
from kernbench.trace.columns import chunk, ints, list_parts, nulls, strings
from kernbench.trace.op_stream import Events

Operand = tuple[str, int, int, tuple[int, ...], str, bool]


class Row:
    """One row the kernel issued, as the op log holds it."""

    __slots__ = ("op_id", "seq", "op", "inputs", "out", "num", "nbytes", "flops", "attrs",
                 "src")

    def __init__(self, op_id: int, seq: int, op: Op, inputs: tuple[Operand, ...],
                 out: Operand | None, num: int, nbytes: int, flops: int, attrs: str,
                 src: str) -> None:
        self.op_id, self.seq, self.op, self.inputs, self.out = op_id, seq, op, inputs, out
        self.num, self.nbytes, self.flops, self.attrs, self.src = num, nbytes, flops, attrs, src


class Event:
    """One event of ``stream.parquet``: ``kind`` (``record/rows/stream.py``), its integers,
    its source line (or hardware field); a posted receive also carries the operand its
    resolution writes (``out``)."""

    __slots__ = ("seq", "kind", "args", "src", "out")

    def __init__(self, seq: int, kind: int, args: tuple[int, ...], src: str | None) -> None:
        self.seq, self.kind, self.args, self.src = seq, kind, args, src
        self.out: Operand | None = None


@dataclass
class Script:
    """One program's op stream: ``steps`` in order (a ``Row`` to issue, an ``Event`` to
    apply) and the works its rows' cost models read (``WORK``, by seq)."""

    program: int
    steps: list[Row | Event] = field(default_factory=list)
    works: dict[int, tuple[int, ...]] = field(default_factory=dict)


def _operands(struct: pa.StructArray) -> list[Operand]:
    """The operand tuples of a (flat) operand struct array; nulls decode as anything."""
    space, pe, addr, shape, dtype, transposed = struct.flatten()
    start, length, values = list_parts(chunk(shape))
    vals = ints(values).tolist()
    shapes = [tuple(vals[s:s + n]) for s, n in zip(start.tolist(), length.tolist(),
                                                   strict=True)]
    sp_values, sp_codes = strings(space)
    dt_values, dt_codes = strings(dtype)
    return list(zip([sp_values[c] for c in sp_codes.tolist()], ints(pe).tolist(),
                    ints(addr).tolist(), shapes, [dt_values[c] for c in dt_codes.tolist()],
                    [bool(t) for t in ints(transposed).tolist()], strict=True))


def read_rows(ops: pa.Table) -> dict[int, list[Row]]:
    """The rows of ``ops`` each program's kernel issued (not a composite's children), by
    program, in the program's order."""
    col = {n: chunk(ops.column(n)) for n in ("op_id", "program", "seq", "name", "parent",
                                             "inputs", "output", "num_elements", "nbytes",
                                             "flops", "attrs", "src")}
    keep = np.flatnonzero(nulls(col["parent"]))
    names, codes = strings(col["name"])
    op_of = [Op(n) for n in names]
    srcs, src_codes = strings(col["src"])
    start, length, flat = list_parts(col["inputs"])
    ins = _operands(flat)
    out_arr = col["output"]
    outs = _operands(out_arr)
    no_out = nulls(out_arr)
    attrs = col["attrs"].to_pylist()
    op_id, program, seq = (ints(col[n]).tolist() for n in ("op_id", "program", "seq"))
    num, nbytes, flops = (ints(col[n]).tolist() for n in ("num_elements", "nbytes", "flops"))
    st, ln, cd, sc = start.tolist(), length.tolist(), codes.tolist(), src_codes.tolist()
    noo = no_out.tolist()
    by: dict[int, list[Row]] = {}
    for i in keep.tolist():
        s = st[i]
        row = Row(op_id[i], seq[i], op_of[cd[i]], tuple(ins[s:s + ln[i]]),
                  None if noo[i] else outs[i], num[i], nbytes[i], flops[i], attrs[i],
                  srcs[sc[i]])
        got = by.get(program[i])
        if got is None:
            by[program[i]] = [row]
        else:
            got.append(row)
    return by


def scripts(rows: dict[int, list[Row]], events: Events, n_programs: int) -> list[Script]:
    """Every program's script: its kernel rows and its events, merged in order; a posted
    receive takes the later ``recv`` row writing its buffer (the machine makes that row)."""
    evs: dict[int, list[Event]] = {}
    out = [Script(p) for p in range(n_programs)]
    args_all = events.args.tolist()
    srcs = events.srcs
    for program, seq, kind, s, n, src in zip(events.program.tolist(), events.seq.tolist(),
                                             events.kind.tolist(), events.start.tolist(),
                                             events.length.tolist(), events.src.tolist(),
                                             strict=True):
        args = tuple(args_all[s:s + n])
        if kind == WORK:
            out[program].works[seq] = args
            continue
        evs.setdefault(program, []).append(Event(seq, kind, args,
                                                 None if src < 0 else srcs[src]))
    for script in out:
        _merge(script, rows.get(script.program, []), evs.get(script.program, []))
    return out


def _merge(script: Script, rows: list[Row], evs: list[Event]) -> None:
    """``script.steps``: each event before the first row of a higher seq; the ``recv`` rows
    of posted receives left out (each event holds its row's operand)."""
    posted: set[int] = set()  # rows a posted receive resolves into
    for e in evs:
        if e.kind != RECV_ASYNC:
            continue
        addr = e.args[0]
        for k, r in enumerate(rows):
            if (r.op is Op.RECV and k not in posted and r.seq >= e.seq and r.out is not None
                    and r.out[2] == addr):
                posted.add(k)
                e.out = r.out
                break
        else:
            raise TraceFormatError(f"program {script.program}: the recv_async posted at seq "
                                   f"{e.seq} into TCM {addr} has no recv row")
    steps = script.steps
    j, n = 0, len(evs)
    for k, r in enumerate(rows):
        if k in posted:
            continue
        while j < n and evs[j].seq <= r.seq:
            steps.append(evs[j])
            j += 1
        steps.append(r)
    steps.extend(evs[j:])

