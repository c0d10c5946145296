"""Streams op rows to ``ops.parquet`` in record batches (memory flat in the number of ops).

The per-op path packs a row's integer fields into one ``bytearray`` (``ROW.pack``) and
appends its command to ``cmds``. Every ``chunk`` rows the commands are compacted into the
batch's columns (op codes, counts, strings, each chunk's distinct operands: see
``record/rows/columns.py``), so the per-op objects (command, handles, buffers) die young; every
``batch_rows`` rows the batch becomes one Arrow record batch, one Parquet row group, encoded
on a writer thread while the next batch records. Memory is bounded by one batch of compact
columns, whatever the op count (ADR-0514).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.record.commands import Cmd
from kernbench.record.rows.access import AccessWriter
from kernbench.record.rows.columns import (
    CODE,
    ENGINE_DICT,
    ENGINE_OF,
    GUARDED_OF,
    KIND_DICT,
    KIND_OF,
    NAME_DICT,
    NO_OUTPUT,
    NULL_KEY,
    POOL,
    VERSION_2_OF,
    Operands,
    array,
    dictionary,
    used,
)
from kernbench.record.rows.shared import SharedWriter
from kernbench.record.rows.stream import ACCESS, WORK, StreamWriter, unusual_work
from kernbench.schemas.arrow import (
    BITCAST_ATTR,
    GUARD_MINOR,
    MANIFEST_VERSION_INDEXED,
    MANIFEST_VERSION_WIDE,
    OPS,
    SCHEMA_VERSION,
    manifest_version,
)
from kernbench.schemas.dtypes import V3_DTYPES
from kernbench.trace import DATA_FILES, OPTIONAL_FILES, file_sha256, writing

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
_OPERAND = attrgetter("operand")


def uses_version_3(dtypes: Iterable[str], attrs: list[str]) -> bool:
    """Whether a batch's rows need trace version 3: an operand of a version-3 dtype (among
    the batch's operand ``dtypes``) or a bitcast (in a row's ``attrs``) (ADR-0580)."""
    if not V3_DTYPES.isdisjoint(dtypes):
        return True
    # canonical JSON never holds a raw newline, so no match spans two rows' attrs
    return BITCAST_ATTR in "\n".join(attrs)


class OpWriter:
    """Collects op rows and writes them to Parquet ``BATCH_ROWS`` at a time.

    A PE appends a row with ``times.extend(ROW.pack(...))`` and ``cmds.append(cmd)``, then
    calls ``compact()`` once ``len(cmds) >= chunk`` (``row`` does all three)."""

    def __init__(self, path: str | Path, batch_rows: int | None = None,
                 progress: Callable[[int], Any] | None = None, stream: bool = True) -> None:
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
        #: the waits on the chip's shared parts (shared.parquet beside ops.parquet, written
        #: at close when an op waited: only on hardware with a shared part)
        self.shared = SharedWriter(self.path.with_name("shared.parquet"))
        #: what the programs asked of the machine besides their rows (stream.parquet beside
        #: ops.parquet, for ``retime``; None: a throwaway recording that keeps none)
        self.stream = StreamWriter(self.path.with_name("stream.parquet")) if stream else None
        if self.stream is not None:
            self.access.on_add = self._access_added
        #: True once a row needs trace format version 2 (a version-2 op or indexed attrs;
        #: record/lowering/addressing.py sets it for the latter)
        self.indexed = False
        #: True once a row needs version 3 (an operand of a version-3 dtype, or a bitcast)
        self.wide = False
        #: True once a row is a guard: the manifest's version is minor 1 of its major
        self.guarded = False
        self._pq = writing.open_writer(self.path, OPS, "ops", memory_pool=POOL)

    def _reset_columns(self) -> None:
        """The batch's compacted command columns: numpy chunks and interned references."""
        self._compacted = 0  # rows of this batch already compacted
        self._codes: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []  # [3, n] num_elements, nbytes, flops
        self._in_lens: list[np.ndarray] = []
        self._in_ops = Operands()  # the inputs' operands, flattened
        self._out_ops = Operands()  # the outputs' operands (``NULL_KEY`` for none)
        self._attrs: list[str] = []
        self._src: list[str] = []
        self._works: list[tuple[int, tuple[int, ...]]] = []  # (row of the batch, work)

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
            cols = list(zip(*cmds, strict=True))  # the commands' fields, a tuple each
            self._codes.append(np.fromiter(map(CODE.__getitem__, _OP(cols)), np.int32, n))
            counts = np.empty((3, n), np.int64)
            for k, get in enumerate((_NUM, _NBYTES, _FLOPS)):
                counts[k] = get(cols)
            self._counts.append(counts)
            inputs = _INPUTS(cols)
            self._in_lens.append(np.fromiter(map(len, inputs), np.int64, n))
            self._in_ops.add(list(map(_OPERAND, chain.from_iterable(inputs))))
            self._out_ops.add([NULL_KEY if o is None else o.operand for o in _OUT(cols)])
            self._attrs += _ATTRS(cols)
            self._src += _SRC(cols)
            if self.stream is not None:
                self._works += unusual_work(cmds, self._compacted)
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
        inputs_arr = pa.ListArray.from_arrays(array(offsets), self._in_ops.operands(),
                                              pool=POOL)
        no_output = NO_OUTPUT[codes]  # only scope rows write nothing
        if not self.indexed and VERSION_2_OF[codes].any():
            self.indexed = True
        if not self.guarded and GUARDED_OF[codes].any():
            self.guarded = True
        out_struct = self._out_ops.operands(array(no_output) if no_output.any() else None)
        no_parent = parent == NO_PARENT
        start = self._flushed
        arrays = [
            array(np.arange(start, start + n, dtype=np.int64)),
            array(pe.astype(np.int32)), array(program.astype(np.int32)), array(seq),
            used(KIND_OF[codes], KIND_DICT), used(codes, NAME_DICT),
            used(ENGINE_OF[codes], ENGINE_DICT),
            array(parent, mask=no_parent) if no_parent.any() else array(parent),
            array(t_issue), array(t_start), array(t_end), array(busy),
            array(wait), inputs_arr, out_struct,
            array(num_elements), array(nbytes), array(flops), array(cursor),
            array(depth.astype(np.int16)),
            array(self._attrs, pa.string()), dictionary(self._src),
        ]
        if not self.wide:
            self.wide = uses_version_3(self._in_ops.dtypes() | self._out_ops.dtypes(),
                                       self._attrs)
        batch = pa.RecordBatch.from_arrays(arrays, schema=OPS)
        if self._works and self.stream is not None:
            note = self.stream.note
            for i, work in self._works:
                if parent[i] == NO_PARENT:  # a composite's children are the machine's
                    note(int(program[i]), int(seq[i]), WORK, work)
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

    def _access_added(self, ident: int) -> None:
        if self.stream is not None:
            self.stream.note_here(ACCESS, (ident,))

    @property
    def schema_version(self) -> int | str:
        """The manifest's schema_version: 3 when the trace holds a version-3 dtype or a
        bitcast, else 2 when it uses indexed memory, else 1; ``"MAJOR.1"`` when it holds a
        guard (a guarded path, ADR-0840)."""
        if self.wide:
            major = MANIFEST_VERSION_WIDE
        else:
            major = (MANIFEST_VERSION_INDEXED if self.indexed or self.access.used
                     else SCHEMA_VERSION)
        return manifest_version(major, GUARD_MINOR if self.guarded else 0)

    def measured(self, hw: Any, peaks: list[int], k: int, folder: Path) -> dict[str, Any]:
        """What a recording (or a retime) of this log states in its manifest: schema
        version, hardware, op count, latency, scratch peak, resident programs and each
        written file's sha256 (call after ``close``; ``folder`` holds the files)."""
        return {"schema_version": self.schema_version, "hw": hw.to_dict(),
                "n_ops": self.n_ops, "t_end_ps": self.t_end_ps,
                "scratch_peak_bytes": max(peaks), "programs_per_pe": k,
                "files": {n: file_sha256(folder / n) for n in DATA_FILES + OPTIONAL_FILES
                          if n in DATA_FILES or (folder / n).is_file()}}

    def close(self) -> None:
        self.flush()
        self._wait_write()
        self._pool.shutdown()
        self._pq.close()
        self.access.close()
        self.shared.close()
        if self.stream is not None:
            self.stream.close()

    def abort(self) -> None:
        self.access.abort()
        self.shared.abort()
        if self.stream is not None:
            self.stream.abort()
        self.cmds.clear()
        del self.times[:]
        self._reset_columns()
        try:
            self._wait_write()
        except Exception:  # noqa: BLE001 - best effort on the failure path
            pass
        self._pool.shutdown()
        writing.discard(self._pq)
