"""The decoded op log (``Program``): what ``decode`` builds and the run loop, the batcher
and the error messages index by row."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from kernbench.replay.executors import Step
from kernbench.replay.store import Operand
from kernbench.schemas.ops import Op

#: the entries of a bound-signature cache holding the batches made, the batch classes
#: numbered and the table decoded (no signature key is 1 long)
BATCHES, CLASSES, COLUMNS = ("batches",), ("classes",), ("columns",)


@dataclass
class Program:
    """The decoded op log. Per-op arrays are indexed by row; ``order`` is the replay order.
    Steps and operands are kept per distinct op signature (``sig``); ``sig_id[row]``."""

    op_id: np.ndarray
    #: the grid program of each row
    programs: np.ndarray
    names: list[Op]  # by name code
    name_code: np.ndarray
    srcs: list[str]  # by src code
    src_code: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray
    sig_id: np.ndarray
    sig_step: list[Step]
    #: the inputs each signature reads (all of them, for messages)
    sig_ins: list[tuple[Operand, ...]]
    #: the inputs whose valid map must be checked at each read
    sig_checks: list[tuple[Operand, ...]]
    #: the operand each signature writes (None: it writes nothing)
    sig_out: list[Operand | None]
    #: rows sorted by (t_start_ps, op_id)
    order: np.ndarray
    #: per signature, (class id, op, attrs, context) when it may run batched (batching.py);
    #: a class id numbers a class key (``batching.key``) for the whole replay
    sig_batch: list[Any] = dataclasses.field(default_factory=list)
    #: batches made, by their members' steps: kept with the bound signatures across windows
    batches: dict[tuple, Any] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.op_id)

    @cached_property
    def ins(self) -> list[tuple[Operand, ...]]:
        """The inputs of each row."""
        return [self.sig_ins[j] for j in self.sig_id.tolist()]

    @cached_property
    def out(self) -> list[Operand | None]:
        """The written operand of each row."""
        return [self.sig_out[j] for j in self.sig_id.tolist()]

    def name(self, row: int) -> Op:
        return self.names[int(self.name_code[row])]

    def src(self, row: int) -> str:
        return self.srcs[int(self.src_code[row])]

    def program(self, row: int) -> int:
        return int(self.programs[row])

    def where(self, row: int) -> str:
        return f"op {int(self.op_id[row])} ({self.name(row).value} at {self.src(row)})"
