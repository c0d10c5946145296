"""Streams op rows to ``ops.parquet`` in record batches (memory flat in the number of ops).

The per-op path appends one tuple; columns are built only when a batch is flushed.
"""

from __future__ import annotations

from pathlib import Path

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
_NULL = TensorHandle(Buffer("tcm", 0, 0, 0, None, ""), (), float32)


def _operand_arrays(handles: list[TensorHandle]) -> list[pa.Array]:
    space, pe, addr, dtype, transposed, shape_off, shape_vals = [], [], [], [], [], [0], []
    for h in handles:
        b = h.buf
        space.append(b.space)
        pe.append(b.pe)
        addr.append(b.addr)
        dtype.append(h.dtype.name)
        transposed.append(h.transposed)
        shape_vals.extend(h.shape)
        shape_off.append(len(shape_vals))
    shape = pa.ListArray.from_arrays(pa.array(shape_off, pa.int32()),
                                     pa.array(shape_vals, pa.int64()))
    return [pa.array(space, pa.string()), pa.array(pe, pa.int32()), pa.array(addr, pa.int64()),
            shape, pa.array(dtype, pa.string()), pa.array(transposed, pa.bool_())]


def _dict(values: tuple) -> pa.Array:
    return pa.array(values, pa.string()).dictionary_encode()


class OpWriter:
    """Collects op rows and writes them to Parquet ``BATCH_ROWS`` at a time."""

    def __init__(self, path: str | Path, batch_rows: int = BATCH_ROWS) -> None:
        self.path = Path(path)
        self.batch_rows = batch_rows
        self.rows: list[tuple] = []
        self.n_ops = 0
        self.t_end_ps = 0
        self._flushed = 0
        self._pq = pq.ParquetWriter(
            self.path, OPS, compression="zstd", compression_level=9,
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
        cols = list(zip(*self.rows, strict=True))
        n = len(self.rows)
        (pe, program, seq, name, parent, t_issue, t_start, t_end, busy, wait, inputs, output,
         num_elements, nbytes, flops, cursor, depth, attrs, src) = cols
        flat: list[TensorHandle] = [h for ins in inputs for h in ins]
        offsets = [0]
        for ins in inputs:
            offsets.append(offsets[-1] + len(ins))
        in_struct = pa.StructArray.from_arrays(_operand_arrays(flat), fields=_OPERAND_FIELDS)
        inputs_arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), in_struct)
        if None in output:  # null rows get placeholder children under a null mask
            mask = pa.array([o is None for o in output], pa.bool_())
            output = tuple(_NULL if o is None else o for o in output)
        else:
            mask = None
        out_struct = pa.StructArray.from_arrays(_operand_arrays(output), fields=_OPERAND_FIELDS,
                                                mask=mask)
        start = self._flushed
        arrays = [
            pa.array(range(start, start + n), pa.int64()),
            pa.array(pe, pa.int32()), pa.array(program, pa.int32()), pa.array(seq, pa.int64()),
            _dict(tuple(KIND[o].value for o in name)), _dict(tuple(o.value for o in name)),
            _dict(tuple(ENGINE[o].value for o in name)),
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
        self.rows = []

    def close(self) -> None:
        self.flush()
        self._pq.close()

    def abort(self) -> None:
        self.rows = []
        try:
            self._pq.close()
        except Exception:  # noqa: BLE001 - best effort on the failure path
            pass
