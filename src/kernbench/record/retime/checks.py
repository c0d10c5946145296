"""Where a trace's op stream depends on the hardware ``retime`` is asked for.

Before anything runs: a hardware field the program read (``HW`` events) that changed,
unless ``retime`` works its consequence out again (``UNDERSTOOD``); IPCQ on a ring of
another size, or a message larger than the new slots. While it runs, the machine refuses
the rest: a program that no longer fits its slot (``run.py``), a composite's tiles that no
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
from kernbench.record.retime.script import Row, Script
from kernbench.record.rows import stream as ev
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import OP
from kernbench.trace import Trace
from kernbench.trace.hw import HwConfig

#: the hardware fields the lowering reads whose consequences ``retime`` works out again:
#: a transfer's bursts, a composite's tiles (``work.py``), the PEs and slots of IPCQ
#: (checked here)
UNDERSTOOD = frozenset({"dma_burst_bytes", "stage_bytes", "stage_kib", "n_pe",
                        "ipcq_slot_bytes", "ipcq_slot_kib"})
_IPCQ = frozenset({OP.SEND, OP.RECV})


def _at(script: Script, k: int) -> str:
    """The op at or after step ``k`` of a script, as a refusal names it."""
    for step in script.steps[k:]:
        if type(step) is Row:
            return f"{step.src} (program {script.program}, op {step.op_id})"
    return f"the end of program {script.program}"


def check(src: Trace, plan: list[Script], old: HwConfig, new: HwConfig,
          n_programs: int) -> bool:
    """Refuse (``RetimeError``) where the stream depends on ``new``; whether it decides on
    data (guards, which ``retime`` evaluates again)."""
    guards = False
    ipcq: tuple[Script, int] | None = None
    for script in plan:
        for k, step in enumerate(script.steps):
            if isinstance(step, Row):
                if step.op is OP.GUARD:
                    guards = True
                elif step.op in _IPCQ:
                    ipcq = ipcq or (script, k)
                    if step.op is OP.SEND and step.nbytes > new.ipcq_slot_bytes:
                        raise RetimeError(f"{_at(script, k)}: a message of {step.nbytes} "
                                          f"bytes exceeds the IPCQ slot of {new.name} "
                                          f"({new.ipcq_slot_bytes} bytes)")
                continue
            e = step
            if e.kind == ev.RECV_ASYNC:
                ipcq = ipcq or (script, k)
            elif e.kind == ev.HW and e.src not in UNDERSTOOD and e.src is not None:
                was, now = getattr(old, e.src, None), getattr(new, e.src, None)
                if was != now:
                    raise RetimeError(f"{_at(script, k)}: the case read hw.{e.src} ({was!r}; "
                                      f"{now!r} on {new.name}), so its op stream may depend "
                                      "on it; record it on that hardware instead")
    if ipcq is not None and min(old.n_pe, n_programs) != min(new.n_pe, n_programs):
        raise RetimeError(f"{_at(*ipcq)}: the programs talk over a ring of "
                          f"{min(old.n_pe, n_programs)} PEs, which is "
                          f"{min(new.n_pe, n_programs)} on {new.name} (n_pe = {new.n_pe}): "
                          "the op stream depends on it")
    return guards


def guard_shadow(src: Trace, writer: Any) -> Shadow:
    """The value graph guards are evaluated on (as ``kb.record`` keeps it): the trace's HBM
    tensors (their initial contents from tensors.parquet, data only) and the access arrays
    of the op log being written."""
    table = src.tensors_table
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
