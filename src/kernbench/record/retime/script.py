"""A trace's op stream decoded: the rows each program's kernel issued (a composite's
children are the machine's) and the events of ``stream.parquet`` (``record/rows/stream.py``),
by program. Operands are decoded once per distinct operand, as tuples ``(space, pe, addr,
shape, dtype, transposed)`` (``TensorHandle.operand``). ``source.py`` reads them part by
part and merges each program's into the order they happened.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kernbench.record.rows.stream import WORK
from kernbench.schemas.ops import Op
from kernbench.trace.columns import chunk, ints, list_parts, nulls, strings, unique_rows
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


def _operands(struct: pa.StructArray) -> list[Operand]:
    """The operand tuples of a (flat) operand struct array, one tuple per distinct operand
    (shared by every row naming it); nulls decode as anything."""
    n = len(struct)
    if not n:
        return []
    space, pe, addr, shape, dtype, transposed = struct.flatten()
    start, length, values = list_parts(chunk(shape))
    vals = ints(values)
    sp_values, sp_codes = strings(space)
    dt_values, dt_codes = strings(dtype)
    rank = int(length.max())
    dims = np.full((n, rank), -1, np.int64)
    for j in range(rank):
        has = length > j
        dims[has, j] = vals[start[has] + j]
    keys = np.column_stack([sp_codes, ints(pe), ints(addr), dt_codes, ints(transposed),
                            length, dims])
    distinct, which = unique_rows(keys)
    made = [(sp_values[r[0]], r[1], r[2], tuple(r[6:6 + r[5]]), dt_values[r[3]], bool(r[4]))
            for r in distinct.tolist()]
    return [made[i] for i in which.tolist()]


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


def read_events(events: Events) -> dict[int, tuple[list[Event], list[tuple[int, tuple[int, ...]]]]]:
    """The events of a (checked) part of ``stream.parquet`` by program: (its events in
    order, its works as (seq, work) in seq order)."""
    out: dict[int, tuple[list[Event], list[tuple[int, tuple[int, ...]]]]] = {}
    args_all = events.args.tolist()
    srcs = events.srcs
    for program, seq, kind, s, n, src in zip(events.program.tolist(), events.seq.tolist(),
                                             events.kind.tolist(), events.start.tolist(),
                                             events.length.tolist(), events.src.tolist(),
                                             strict=True):
        got = out.get(program)
        if got is None:
            got = out[program] = ([], [])
        args = tuple(args_all[s:s + n])
        if kind == WORK:
            got[1].append((seq, args))
        else:
            got[0].append(Event(seq, kind, args, None if src < 0 else srcs[src]))
    return out
