"""Streams op rows to ``ops.parquet`` in record batches (memory flat in the number of ops).

The per-op path packs a row's integer fields into one ``bytearray`` (``ROW.pack``) and
appends its command to ``cmds``. Every ``chunk`` rows the commands are compacted into the
batch's columns (codes, counts, references to interned operands and strings), so the
per-op objects (command, handles, buffers) die young; every ``batch_rows`` rows the batch
becomes one Arrow record batch, one Parquet row group. Memory is bounded by one batch of
compact columns, whatever the op count (ADR-0520).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kernbench.record.access import AccessWriter
from kernbench.record.commands import Cmd
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.schemas.arrow import MANIFEST_VERSION_INDEXED, OPERAND, OPS, SCHEMA_VERSION
from kernbench.schemas.dtypes import float32
from kernbench.schemas.ops import ENGINE, KIND, SCOPE, VERSION_2, Engine, Kind, Op

BATCH_ROWS = 1 << 14

#: rows per compaction of the pending commands (a chunk's per-op objects then die)
CHUNK_ROWS = 4096

#: the fields of a row: the integers ``ROW`` packs, then the command (op_id, kind and engine
#: are derived); tests check them against the Arrow schema, the single source of truth.
ROW_FIELDS = (
    "pe", "program", "seq", "parent", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps",
    "wait_ps", "scratch_cursor", "scope_depth", "cmd",
)
#: a row's integer fields, packed native int64 (``parent`` is -1 for none)
ROW = struct.Struct(f"={len(ROW_FIELDS) - 1}q")
NO_PARENT = -1
#: the op-log columns read from the row's command (a ``Cmd``): column -> Cmd field
CMD_COLUMNS = {"name": "op", "inputs": "inputs", "output": "out", "num_elements": "num_elements",
               "nbytes": "nbytes", "flops": "flops", "attrs": "attrs", "src": "src"}
DERIVED_FIELDS = ("op_id", "kind", "engine")

_OP, _INPUTS, _OUT, _NUM, _NBYTES, _FLOPS, _ATTRS, _SRC = (
    itemgetter(Cmd._fields.index(CMD_COLUMNS[c])) for c in
    ("name", "inputs", "output", "num_elements", "nbytes", "flops", "attrs", "src"))
#: the recorder's Arrow allocations (columns, Parquet encoding) come from the system
#: allocator: the default mimalloc pool keeps per-thread pages of every size the batches
#: and the writer thread used, so a recording's peak RSS grew with its op count (ADR-0511)
POOL = pa.system_memory_pool()
_array = partial(pa.array, memory_pool=POOL)
_NULL_KEY = TensorHandle(Buffer("tcm", 0, 0, 0, None, ""), (), float32).operand
_OPERAND_FIELDS = list(OPERAND)
_OPERAND = attrgetter("operand")


def by_identity(objs: list) -> tuple[list, np.ndarray]:
    """The distinct objects of ``objs`` by identity (ordered by address) and each entry's
    index among them: one numpy sort, no per-row dict (``objs`` keeps the ids valid)."""
    ids = np.fromiter(map(id, objs), np.int64, len(objs))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    return list(map(objs.__getitem__, first.tolist())), inverse.astype(np.int32)


def _operand_struct(uniq: list[tuple], idx: np.ndarray, mask: pa.Array | None = None
                    ) -> pa.Array:
    """The OPERAND struct array of the operands ``uniq[idx]`` (``TensorHandle.operand``
    tuples). Each distinct operand is converted once and gathered with numpy (a loop re-uses
    the same few operands again and again)."""
    space, pe, addr, shapes, dtype, transposed = (list(map(itemgetter(i), uniq))
                                                  for i in range(6))
    u_len = np.fromiter(map(len, shapes), np.int64, len(shapes))
    u_off = np.concatenate(([0], np.cumsum(u_len)))
    u_vals = np.fromiter(chain.from_iterable(shapes), np.int64, int(u_off[-1]))
    lens = u_len[idx]
    offsets = np.concatenate(([0], np.cumsum(lens)))
    pos = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - u_off[idx], lens)
    shape = pa.ListArray.from_arrays(_array(offsets.astype(np.int32)), _array(u_vals[pos]),
                                     pool=POOL)
    where = _array(idx)
    children = [
        pc.take(_array(space, pa.string()), where, memory_pool=POOL),
        _array(np.array(pe, np.int32)[idx]),
        _array(np.array(addr, np.int64)[idx]),
        shape,
        pc.take(_array(dtype, pa.string()), where, memory_pool=POOL),
        _array(np.array(transposed, np.bool_)[idx]),
    ]
    return pa.StructArray.from_arrays(children, fields=_OPERAND_FIELDS, mask=mask,
                                     memory_pool=POOL)


class _Operands:
    """One column of operands, compacted chunk by chunk: each chunk's distinct operands
    and the chunk's indices into them."""

    __slots__ = ("uniq", "idx", "n_uniq")

    def __init__(self) -> None:
        self.uniq: list[tuple] = []
        self.idx: list[np.ndarray] = []
        self.n_uniq = 0

    def add(self, keys: list[tuple]) -> None:
        uniq, idx = by_identity(keys)
        self.idx.append(idx + self.n_uniq)
        self.uniq += uniq
        self.n_uniq += len(uniq)

    def struct(self, mask: pa.Array | None = None) -> pa.Array:
        idx = np.concatenate(self.idx) if self.idx else np.zeros(0, np.int32)
        return _operand_struct(self.uniq, idx, mask)


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
    return pa.DictionaryArray.from_arrays(
        _array(np.searchsorted(used, codes).astype(np.int32)),
        pc.take(vocabulary, _array(used), memory_pool=POOL), memory_pool=POOL)


def _dict(values: list | tuple) -> pa.Array:
    return pc.dictionary_encode(_array(values, pa.string()), memory_pool=POOL)


class OpWriter:
    """Collects op rows and writes them to Parquet ``BATCH_ROWS`` at a time.

    A PE appends a row with ``times.extend(ROW.pack(...))`` and ``cmds.append(cmd)``, then
    calls ``compact()`` once ``len(cmds) >= chunk`` (``row`` does all three)."""

    def __init__(self, path: str | Path, batch_rows: int | None = None,
                 progress: Callable[[int], Any] | None = None) -> None:
        self.path = Path(path)
        self.progress = progress  # called with the op count after every flushed batch
        self.batch_rows = batch_rows or BATCH_ROWS
        self.times = bytearray()  # the packed integer fields of the batch's rows
        self.cmds: list[Cmd] = []  # the commands of rows not compacted yet
        self.chunk = min(CHUNK_ROWS, self.batch_rows)  # compact when cmds reaches this
        self.n_ops = 0
        self.t_end_ps = 0
        self._flushed = 0
        self._reset_columns()
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
            write_statistics=False, store_schema=True, memory_pool=POOL,
        )

    def _reset_columns(self) -> None:
        """The batch's compacted command columns: numpy chunks and interned references."""
        self._compacted = 0  # rows of this batch already compacted
        self._codes: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []  # [3, n] num_elements, nbytes, flops
        self._in_lens: list[np.ndarray] = []
        self._in_ops = _Operands()  # the inputs' operands, flattened
        self._out_ops = _Operands()  # the outputs' operands (``_NULL_KEY`` for none)
        self._attrs: list[str] = []
        self._src: list[str] = []

    @property
    def next_op_id(self) -> int:
        return self._flushed + self._compacted + len(self.cmds)

    def row(self, fields: tuple[int, ...], cmd: Cmd) -> None:
        """Append one row: its ``ROW_FIELDS`` integers and its command."""
        self.times += ROW.pack(*fields)
        cmds = self.cmds
        cmds.append(cmd)
        if len(cmds) >= self.chunk:
            self.compact()

    def compact(self) -> None:
        """Turn the pending commands into columns of the batch (they are then released);
        write the batch once it holds ``batch_rows`` rows."""
        cmds = self.cmds
        n = len(cmds)
        if n:
            codes = np.fromiter(map(_CODE.__getitem__, map(_OP, cmds)), np.int32, n)
            self._codes.append(codes)
            counts = np.empty((3, n), np.int64)
            for k, get in enumerate((_NUM, _NBYTES, _FLOPS)):
                counts[k] = np.fromiter(map(get, cmds), np.int64, n)
            self._counts.append(counts)
            inputs = list(map(_INPUTS, cmds))
            self._in_lens.append(np.fromiter(map(len, inputs), np.int64, n))
            self._in_ops.add(list(map(_OPERAND, chain.from_iterable(inputs))))
            self._out_ops.add([_NULL_KEY if o is None else o.operand for o in map(_OUT, cmds)])
            self._attrs += map(_ATTRS, cmds)
            self._src += map(_SRC, cmds)
            self._compacted += n
            cmds.clear()  # in place: PE drivers hold this list
        if self._compacted >= self.batch_rows:
            self._write_batch()
        self.chunk = min(CHUNK_ROWS, self.batch_rows - self._compacted)

    def flush(self) -> None:
        """Write every row held so far (one record batch)."""
        self.compact()
        if self._compacted:
            self._write_batch()
            self.chunk = min(CHUNK_ROWS, self.batch_rows)

    def _write_batch(self) -> None:
        n = self._compacted
        width = len(ROW_FIELDS) - 1
        ints = np.frombuffer(self.times, np.int64).reshape(n, width).T.copy()
        del self.times[:]  # in place: PE drivers hold this bytearray (no view is left)
        (pe, program, seq, parent, t_issue, t_start, t_end, busy, wait, cursor,
         depth) = ints
        codes = np.concatenate(self._codes)
        num_elements, nbytes, flops = np.concatenate(self._counts, axis=1)
        lens = np.concatenate(self._in_lens)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(lens, out=offsets[1:])
        inputs_arr = pa.ListArray.from_arrays(_array(offsets), self._in_ops.struct(),
                                              pool=POOL)
        no_output = _NO_OUTPUT[codes]  # only scope rows write nothing
        if not self.indexed and _VERSION_2[codes].any():
            self.indexed = True
        out_struct = self._out_ops.struct(_array(no_output) if no_output.any() else None)
        no_parent = parent == NO_PARENT
        start = self._flushed
        arrays = [
            _array(np.arange(start, start + n, dtype=np.int64)),
            _array(pe.astype(np.int32)), _array(program.astype(np.int32)), _array(seq),
            _used(_KIND_OF[codes], _KIND_DICT), _used(codes, _NAME_DICT),
            _used(_ENGINE_OF[codes], _ENGINE_DICT),
            _array(parent, mask=no_parent) if no_parent.any() else _array(parent),
            _array(t_issue), _array(t_start), _array(t_end), _array(busy),
            _array(wait), inputs_arr, out_struct,
            _array(num_elements), _array(nbytes), _array(flops), _array(cursor),
            _array(depth.astype(np.int16)),
            _array(self._attrs, pa.string()), _dict(self._src),
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=OPS)
        self._wait_write()  # one batch in flight: Parquet encoding releases the GIL, so the
        self._writing = self._pool.submit(self._pq.write_batch, batch)  # next batch records
        self.t_end_ps = max(self.t_end_ps, int(t_end.max()))
        self._flushed += n
        self.n_ops = self._flushed
        self._reset_columns()
        if self.progress is not None:
            self.progress(self.n_ops)

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
        self.cmds.clear()
        del self.times[:]
        self._reset_columns()
        try:
            self._wait_write()
        except Exception:  # noqa: BLE001 - best effort on the failure path
            pass
        self._pool.shutdown()
        try:
            self._pq.close()
        except Exception:  # noqa: BLE001 - best effort on the failure path
            pass
