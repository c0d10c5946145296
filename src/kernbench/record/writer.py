"""Streams op rows to ``ops.parquet`` in record batches (memory flat in the number of ops).

The per-op path appends one tuple; columns are built only when a batch is flushed.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import accumulate, chain
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.record.access import AccessWriter
from kernbench.record.commands import Cmd
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.schemas.arrow import MANIFEST_VERSION_INDEXED, OPERAND, OPS, SCHEMA_VERSION
from kernbench.schemas.dtypes import float32
from kernbench.schemas.ops import ENGINE, KIND, SCOPE, VERSION_2, Engine, Kind, Op

BATCH_ROWS = 65536

#: the fields of a row tuple in ``OpWriter.rows`` (op_id, kind and engine are derived);
#: tests check them against the Arrow schema, the single source of truth.
ROW_FIELDS = (
    "pe", "program", "seq", "parent", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps",
    "wait_ps", "scratch_cursor", "scope_depth", "cmd",
)
#: the op-log columns read from the row's command (a ``Cmd``): column -> Cmd field
CMD_COLUMNS = {"name": "op", "inputs": "inputs", "output": "out", "num_elements": "num_elements",
               "nbytes": "nbytes", "flops": "flops", "attrs": "attrs", "src": "src"}
DERIVED_FIELDS = ("op_id", "kind", "engine")

_ROW_GETTERS = [itemgetter(i) for i in range(len(ROW_FIELDS) - 1)]
_CMD = itemgetter(len(ROW_FIELDS) - 1)
_CMD_GETTERS = [itemgetter(Cmd._fields.index(f)) for f in CMD_COLUMNS.values()]
_NULL_KEY = TensorHandle(Buffer("tcm", 0, 0, 0, None, ""), (), float32).operand
_OPERAND_FIELDS = list(OPERAND)
_OPERAND = attrgetter("operand")


def _operand_struct(keys: list[tuple], mask: pa.Array | None = None) -> pa.Array:
    """The OPERAND struct array of operand ``keys`` (``TensorHandle.operand``). Distinct
    operands are converted once and gathered with numpy (a loop re-uses the same few
    operands again and again)."""
    ids = list(map(id, keys))  # operands are interned: identity finds the equal ones
    first = dict(zip(ids, keys, strict=True))
    index = {i: n for n, i in enumerate(first)}
    idx = np.fromiter(map(index.__getitem__, ids), np.int64, len(ids))
    uniq = list(first.values())
    space, pe, addr, shapes, dtype, transposed = (list(map(itemgetter(i), uniq))
                                                  for i in range(6))
    u_len = np.fromiter(map(len, shapes), np.int64, len(shapes))
    u_off = np.concatenate(([0], np.cumsum(u_len)))
    u_vals = np.fromiter(chain.from_iterable(shapes), np.int64, int(u_off[-1]))
    lens = u_len[idx]
    offsets = np.concatenate(([0], np.cumsum(lens)))
    pos = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - u_off[idx], lens)
    shape = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(u_vals[pos]))
    children = [
        pa.array(np.array(space, dtype=object)[idx], pa.string()),
        pa.array(np.array(pe, np.int32)[idx]),
        pa.array(np.array(addr, np.int64)[idx]),
        shape,
        pa.array(np.array(dtype, dtype=object)[idx], pa.string()),
        pa.array(np.array(transposed, np.bool_)[idx]),
    ]
    return pa.StructArray.from_arrays(children, fields=_OPERAND_FIELDS, mask=mask)


# the vocabulary as dictionaries: a row's name/kind/engine are codes into these. Their order
# is the enums' declaration order, never a set's or a dict built from sets (``KIND`` is
# filled by iterating frozensets, whose order follows PYTHONHASHSEED): the dictionary values
# are written into ops.parquet, so any hash order here would change its bytes (ADR-0500).
# Each batch writes only the values it uses (``_used``), in this order.
_OPS_ORDER = list(Op)
_CODE = {op: i for i, op in enumerate(_OPS_ORDER)}
_NAME_DICT = pa.array([op.value for op in _OPS_ORDER], pa.string())
_KINDS, _ENGINES = list(Kind), list(Engine)
_KIND_DICT = pa.array([k.value for k in _KINDS], pa.string())
_ENGINE_DICT = pa.array([e.value for e in _ENGINES], pa.string())
_KIND_OF = np.array([_KINDS.index(KIND[op]) for op in _OPS_ORDER], np.int32)
_ENGINE_OF = np.array([_ENGINES.index(ENGINE[op]) for op in _OPS_ORDER], np.int32)
_NO_OUTPUT = np.array([op in SCOPE for op in _OPS_ORDER], np.bool_)
_VERSION_2 = np.array([op in VERSION_2 for op in _OPS_ORDER], np.bool_)


def _used(codes: np.ndarray, vocabulary: pa.Array) -> pa.DictionaryArray:
    """Codes into the vocabulary's used values only, kept in vocabulary order: a trace's
    bytes then depend on the ops it uses, not on how many ops the table knows."""
    used = np.unique(codes)
    return pa.DictionaryArray.from_arrays(pa.array(np.searchsorted(used, codes).astype(np.int32)),
                                          vocabulary.take(pa.array(used)))


def _dict(values: list | tuple) -> pa.Array:
    return pa.array(values, pa.string()).dictionary_encode()


class OpWriter:
    """Collects op rows and writes them to Parquet ``BATCH_ROWS`` at a time."""

    def __init__(self, path: str | Path, batch_rows: int | None = None,
                 progress: Callable[[int], Any] | None = None) -> None:
        self.path = Path(path)
        self.progress = progress  # called with the op count after every flushed batch
        self.batch_rows = batch_rows or BATCH_ROWS
        self.rows: list[tuple] = []
        self.n_ops = 0
        self.t_end_ps = 0
        self._flushed = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-ops-writer")
        self._writing: Future | None = None
        #: the arrays indexed rows refer to (access.parquet beside ops.parquet, on first use)
        self.access = AccessWriter(self.path.with_name("access.parquet"))
        #: True once a row needs trace format version 2 (a version-2 op or indexed attrs;
        #: record/indexed.py sets it for the latter)
        self.indexed = False
        self._pq = pq.ParquetWriter(
            self.path, OPS, compression="zstd",
            use_dictionary=["kind", "name", "engine", "src", "attrs",
                            "inputs.list.element.space", "inputs.list.element.dtype",
                            "output.space", "output.dtype"],
            write_statistics=False, store_schema=True,
        )

    @property
    def next_op_id(self) -> int:
        return self._flushed + len(self.rows)

    def flush(self) -> None:
        if not self.rows:
            return
        rows = self.rows
        n = len(rows)
        # column by column with C-level maps (zip(*rows) is slower)
        (pe, program, seq, parent, t_issue, t_start, t_end, busy, wait, cursor,
         depth) = [list(map(getter, rows)) for getter in _ROW_GETTERS]
        cmds = list(map(_CMD, rows))
        name, inputs, output, num_elements, nbytes, flops, attrs, src = [
            list(map(getter, cmds)) for getter in _CMD_GETTERS]
        flat = list(map(_OPERAND, chain.from_iterable(inputs)))
        offsets = list(accumulate(map(len, inputs), initial=0))
        inputs_arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                              _operand_struct(flat))
        codes = np.fromiter(map(_CODE.__getitem__, name), np.int32, n)
        no_output = _NO_OUTPUT[codes]  # only scope rows write nothing
        if not self.indexed and _VERSION_2[codes].any():
            self.indexed = True
        if no_output.any():  # null rows get placeholder children under a mask
            keys = [_NULL_KEY if o is None else o.operand for o in output]
            out_struct = _operand_struct(keys, pa.array(no_output))
        else:
            out_struct = _operand_struct(list(map(_OPERAND, output)))
        start = self._flushed
        arrays = [
            pa.array(range(start, start + n), pa.int64()),
            pa.array(pe, pa.int32()), pa.array(program, pa.int32()), pa.array(seq, pa.int64()),
            _used(_KIND_OF[codes], _KIND_DICT), _used(codes, _NAME_DICT),
            _used(_ENGINE_OF[codes], _ENGINE_DICT),
            pa.array(parent, pa.int64()),
            pa.array(t_issue, pa.int64()), pa.array(t_start, pa.int64()),
            pa.array(t_end, pa.int64()), pa.array(busy, pa.int64()), pa.array(wait, pa.int64()),
            inputs_arr, out_struct,
            pa.array(num_elements, pa.int64()), pa.array(nbytes, pa.int64()),
            pa.array(flops, pa.int64()), pa.array(cursor, pa.int64()), pa.array(depth, pa.int16()),
            pa.array(attrs, pa.string()), _dict(src),
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=OPS)
        self._wait_write()  # one batch in flight: Parquet encoding releases the GIL, so the
        self._writing = self._pool.submit(self._pq.write_batch, batch)  # next batch records
        self.t_end_ps = max(self.t_end_ps, max(t_end))
        self._flushed += n
        self.n_ops = self._flushed
        if self.progress is not None:
            self.progress(self.n_ops)
        rows.clear()  # in place: PE drivers hold this list

    def _wait_write(self) -> None:
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    @property
    def schema_version(self) -> int:
        """The manifest's schema_version: 2 when the trace uses indexed memory, else 1."""
        return MANIFEST_VERSION_INDEXED if self.indexed or self.access.used else SCHEMA_VERSION

    def close(self) -> None:
        self.flush()
        self._wait_write()
        self._pool.shutdown()
        self._pq.close()
        self.access.close()

    def abort(self) -> None:
        self.access.abort()
        self.rows.clear()
        try:
            self._wait_write()
        except Exception:  # noqa: BLE001 - best effort on the failure path
            pass
        self._pool.shutdown()
        try:
            self._pq.close()
        except Exception:  # noqa: BLE001 - best effort on the failure path
            pass
