"""Where a trace's op stream depends on the hardware ``retime`` is asked for.

Before anything runs: a hardware field the program read (``HW`` events) that changed,
unless ``retime`` works its consequence out again (``UNDERSTOOD``); IPCQ on a ring of
another size, or a message larger than the new slots. While it runs, the machine refuses
the rest: a program that no longer fits its slot (``entry.py``), a composite's tiles that no
longer fit the staging area (``work.py``), a guard whose value depended on time
(``player.py``: the guard is evaluated again, as ``kb.record`` evaluates it, and compared
with the recorded bits).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from kernbench.case.tensors import init_from_json
from kernbench.errors import RetimeError
from kernbench.record.guards.graph import Shadow
from kernbench.record.guards.hbm import Hbm
from kernbench.record.retime.source import Source, read_group
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import OP
from kernbench.trace import Trace
from kernbench.trace.columns import ints, strings
from kernbench.trace.hw import HwConfig
from kernbench.trace.parquet import read_table

#: the hardware fields the lowering reads whose consequences ``retime`` works out again:
#: a transfer's bursts, a composite's tiles (``work.py``), the PEs and slots of IPCQ
#: (checked here)
UNDERSTOOD = frozenset({"dma_burst_bytes", "stage_bytes", "stage_kib", "n_pe",
                        "ipcq_slot_bytes", "ipcq_slot_kib"})


def _at(source: Source, program: int, seq: int = 0) -> str:
    """The program's first row at or after ``seq``, as a refusal names it."""
    for row in source.rows(program):
        if row.seq >= seq:
            return f"{row.src} (program {program}, op {row.op_id})"
    return f"the end of program {program}"


def check(source: Source, old: HwConfig, new: HwConfig, n_programs: int) -> bool:
    """Refuse (``RetimeError``) where the stream depends on ``new``; whether it decides on
    data (guards, which ``retime`` evaluates again). A scan of a few columns, a row group
    at a time."""
    guards = False
    ipcq: tuple[int, int] | None = None  # (program, seq) of the first IPCQ op or post
    ops = source.ops
    for g in range(ops.pf.num_row_groups):
        t = read_group(ops.pf, ops.path, g, ["program", "seq", "name", "nbytes"])
        names, codes = strings(t.column("name"))
        code = {n: k for k, n in enumerate(names)}
        guards = guards or bool((codes == code.get(OP.GUARD.value, -2)).any())
        sends = codes == code.get(OP.SEND.value, -2)
        talk = sends | (codes == code.get(OP.RECV.value, -2))
        if ipcq is None and talk.any():
            k = int(np.flatnonzero(talk)[0])
            ipcq = (int(ints(t.column("program"))[k]), int(ints(t.column("seq"))[k]))
        big = sends & (ints(t.column("nbytes")) > new.ipcq_slot_bytes)
        if big.any():
            k = int(np.flatnonzero(big)[0])
            program, seq = int(ints(t.column("program"))[k]), int(ints(t.column("seq"))[k])
            raise RetimeError(f"{_at(source, program, seq)}: a message of "
                              f"{int(ints(t.column('nbytes'))[k])} bytes exceeds the IPCQ "
                              f"slot of {new.name} ({new.ipcq_slot_bytes} bytes)")
    events = source.events
    for g in range(events.pf.num_row_groups):
        t = read_group(events.pf, events.path, g, ["program", "seq", "kind", "src"])
        kinds, codes = strings(t.column("kind"))
        posts = codes == (kinds.index("recv_async") if "recv_async" in kinds else -2)
        if ipcq is None and posts.any():
            k = int(np.flatnonzero(posts)[0])
            ipcq = (int(ints(t.column("program"))[k]), int(ints(t.column("seq"))[k]))
        reads = np.flatnonzero(codes == (kinds.index("hw") if "hw" in kinds else -2))
        fields = t.column("src").to_pylist()
        for k in reads.tolist():
            field = fields[k]
            if field in UNDERSTOOD or not isinstance(field, str):
                continue
            was, now = getattr(old, field, None), getattr(new, field, None)
            if was != now:
                at = _at(source, int(ints(t.column("program"))[k]),
                         int(ints(t.column("seq"))[k]))
                raise RetimeError(f"{at}: the case read hw.{field} ({was!r}; {now!r} on "
                                  f"{new.name}), so its op stream may depend on it; record "
                                  "it on that hardware instead")
    if ipcq is not None and min(old.n_pe, n_programs) != min(new.n_pe, n_programs):
        raise RetimeError(f"{_at(source, *ipcq)}: the programs talk over a ring of "
                          f"{min(old.n_pe, n_programs)} PEs, which is "
                          f"{min(new.n_pe, n_programs)} on {new.name} (n_pe = {new.n_pe}): "
                          "the op stream depends on it")
    return guards


def guard_shadow(src: Trace, writer: Any) -> Shadow:
    """The value graph guards are evaluated on (as ``kb.record`` keeps it): the trace's HBM
    tensors (their initial contents from tensors.parquet, data only) and the access arrays
    of the op log being written."""
    table = read_table(src.path / "tensors.parquet", "kernbench-tensors")
    rows = table.drop_columns(["data"]).to_pylist()
    datas = table.column("data").to_pylist()
    tensors = {}
    for row, data in zip(rows, datas, strict=True):
        dt = DTYPES[row["dtype"]]
        shape = tuple(int(s) for s in row["shape"])
        init = init_from_json(row["init"], data, shape=shape, dtype=dt)
        tensors[row["name"]] = (int(row["addr"]), int(np.prod(shape)), dt.storage,
                                partial(init.storage_view, shape, dt))
    return Shadow(Hbm(tensors), writer.access.keep())
