"""Streams op rows to ``ops.parquet`` in record batches (memory flat in the number of ops).

The per-op path appends one tuple; columns are built only when a batch is flushed.
"""

from __future__ import annotations

from itertools import accumulate, chain
from operator import attrgetter, itemgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.record.handle import Buffer, TensorHandle
from kernbench.schemas.arrow import OPERAND, OPS
from kernbench.schemas.dtypes import float32
from kernbench.schemas.ops import ENGINE, KIND

BATCH_ROWS = 65536

#: the order of fields in a row tuple handed to ``OpWriter.append`` (op_id, kind and engine
#: are derived); tests check this against the Arrow schema, the single source of truth.
ROW_FIELDS = (
    "pe", "program", "seq", "name", "parent", "t_issue_ps", "t_start_ps", "t_end_ps",
    "busy_ps", "wait_ps", "inputs", "output", "num_elements", "nbytes", "flops",
    "scratch_cursor", "scope_depth", "attrs", "src",
)
DERIVED_FIELDS = ("op_id", "kind", "engine")

_OPERAND_FIELDS = list(OPERAND)
_COLUMN_GETTERS = [itemgetter(i) for i in range(len(ROW_FIELDS))]
_NULL = TensorHandle(Buffer("tcm", 0, 0, 0, None, ""), (), float32)


_OPERAND = attrgetter("operand")


def _operand_struct(handles: list[TensorHandle], mask: pa.Array | None = None) -> pa.Array:
    """The OPERAND struct array of ``handles``. Distinct operands are converted once and
    gathered with numpy (a loop re-uses the same few operands again and again)."""
    keys = list(map(_OPERAND, handles))
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    idx = np.fromiter(map(index.__getitem__, keys), np.int64, len(keys))
    uniq = list(index)
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


_NAME_STR = {op: op.value for op in KIND}
_KIND_STR = {op: k.value for op, k in KIND.items()}
_ENGINE_STR = {op: e.value for op, e in ENGINE.items()}


def _dict(values: list | tuple) -> pa.Array:
    return pa.array(values, pa.string()).dictionary_encode()


class OpWriter:
    """Collects op rows and writes them to Parquet ``BATCH_ROWS`` at a time."""

    def __init__(self, path: str | Path, batch_rows: int | None = None) -> None:
        self.path = Path(path)
        self.batch_rows = batch_rows or BATCH_ROWS
        self.rows: list[tuple] = []
        self.n_ops = 0
        self.t_end_ps = 0
        self._flushed = 0
        self._pq = pq.ParquetWriter(
            self.path, OPS, compression="zstd",
            use_dictionary=["kind", "name", "engine", "src", "attrs",
                            "inputs.list.element.space", "inputs.list.element.dtype",
                            "output.space", "output.dtype"],
            write_statistics=False, store_schema=True,
        )

    def append(self, row: tuple) -> int:
        """Add one row (fields in ROW_FIELDS order); returns its op_id."""
        rows = self.rows
        rows.append(row)
        if len(rows) >= self.batch_rows:
            self.flush()
        return self._flushed + len(rows) - 1

    @property
    def next_op_id(self) -> int:
        return self._flushed + len(self.rows)

    def flush(self) -> None:
        if not self.rows:
            return
        rows = self.rows
        cols = [list(map(getter, rows)) for getter in _COLUMN_GETTERS]  # zip(*rows) is slower
        n = len(self.rows)
        (pe, program, seq, name, parent, t_issue, t_start, t_end, busy, wait, inputs, output,
         num_elements, nbytes, flops, cursor, depth, attrs, src) = cols
        flat: list[TensorHandle] = list(chain.from_iterable(inputs))
        offsets = list(accumulate(map(len, inputs), initial=0))
        inputs_arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                              _operand_struct(flat))
        if any(o is None for o in output):  # null rows get placeholder children under a mask
            mask = pa.array([o is None for o in output], pa.bool_())
            output = [_NULL if o is None else o for o in output]
        else:
            mask = None
        out_struct = _operand_struct(output, mask)
        start = self._flushed
        arrays = [
            pa.array(range(start, start + n), pa.int64()),
            pa.array(pe, pa.int32()), pa.array(program, pa.int32()), pa.array(seq, pa.int64()),
            _dict(list(map(_KIND_STR.__getitem__, name))),
            _dict(list(map(_NAME_STR.__getitem__, name))),
            _dict(list(map(_ENGINE_STR.__getitem__, name))),
            pa.array(parent, pa.int64()),
            pa.array(t_issue, pa.int64()), pa.array(t_start, pa.int64()),
            pa.array(t_end, pa.int64()), pa.array(busy, pa.int64()), pa.array(wait, pa.int64()),
            inputs_arr, out_struct,
            pa.array(num_elements, pa.int64()), pa.array(nbytes, pa.int64()),
            pa.array(flops, pa.int64()), pa.array(cursor, pa.int64()), pa.array(depth, pa.int16()),
            pa.array(attrs, pa.string()), _dict(src),
        ]
        self._pq.write_batch(pa.RecordBatch.from_arrays(arrays, schema=OPS))
        self.t_end_ps = max(self.t_end_ps, max(t_end))
        self._flushed += n
        self.n_ops = self._flushed
        rows.clear()  # in place: PE drivers hold this list

    def close(self) -> None:
        self.flush()
        self._pq.close()

    def abort(self) -> None:
        self.rows.clear()
        try:
            self._pq.close()
        except Exception:  # noqa: BLE001 - best effort on the failure path
            pass
