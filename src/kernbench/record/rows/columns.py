"""The op log's Arrow columns, built from compacted chunks of rows (``record/rows/writer.py``).

Operands, repeated row after row, are kept as each chunk's distinct operand tuples, by
identity, plus the rows' indices into them; a batch converts each distinct operand once and
gathers. Every column equals what converting the rows one by one gives, so ops.parquet's
bytes do not depend on the chunking.

Gathers and dictionary encodings are numpy and plain Arrow buffers, never
``pyarrow.compute``: importing it costs about a tenth of a second, which is most of a small
recording's own time (ADR-0635).
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.record.handle import Buffer, TensorHandle
from kernbench.schemas import ops
from kernbench.schemas.arrow import OPERAND
from kernbench.schemas.dtypes import float32
from kernbench.schemas.ops import ENGINE, KIND, VERSION_2, Engine, Kind, Op

#: the recorder's Arrow allocations (columns, Parquet encoding) come from the system
#: allocator: the default mimalloc pool keeps per-thread pages of every size the batches
#: and the writer thread used, so a recording's peak RSS grew with its op count (ADR-0514)
POOL = pa.system_memory_pool()
#: the Arrow type of each numpy dtype the columns are built from
_ARROW_OF = {np.dtype(np.int64): pa.int64(), np.dtype(np.int32): pa.int32(),
             np.dtype(np.int16): pa.int16(), np.dtype(np.bool_): pa.bool_()}


def _bits(flags: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def array(values: Any, type: pa.DataType | None = None, mask: np.ndarray | None = None
          ) -> pa.Array:
    """``pa.array(values, type, mask=mask)``; a 1-d numpy array (of a dtype ``_ARROW_OF``
    names) is wrapped from its buffers instead, because ``pa.array`` of a numpy array asks
    for ``numpy.ma``, whose import costs as much as a small recording (ADR-0635)."""
    if not isinstance(values, np.ndarray):
        return pa.array(values, type, mask=mask, memory_pool=POOL)
    arrow = _ARROW_OF[values.dtype]
    data = (_bits(values) if values.dtype == np.bool_
            else pa.py_buffer(np.ascontiguousarray(values)))
    valid = None if mask is None else _bits(~mask)
    return pa.Array.from_buffers(arrow, len(values), [valid, data],
                                 null_count=0 if mask is None else int(mask.sum()))


#: the operand of a row that writes nothing (masked out)
NULL_KEY = TensorHandle(Buffer("tcm", 0, 0, 0, None, ""), (), float32).operand
_OPERAND_FIELDS = list(OPERAND)


def take_strings(values: list[str], idx: np.ndarray) -> pa.Array:
    """The string array ``[values[i] for i in idx]``, gathered as bytes by numpy (the same
    values ``pyarrow.compute.take`` gives, built from offsets and data buffers)."""
    raw = [v.encode() for v in values]
    u_len = np.fromiter(map(len, raw), np.int64, len(raw))
    u_off = np.concatenate(([0], np.cumsum(u_len)))
    u_data = np.frombuffer(b"".join(raw), np.uint8)
    lens = u_len[idx]
    offsets = np.zeros(len(idx) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] >= 1 << 31:  # beyond a 32-bit string array's offsets
        return array(list(map(values.__getitem__, idx.tolist())), pa.string())
    pos = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - u_off[idx], lens)
    return pa.StringArray.from_buffers(len(idx), pa.py_buffer(offsets.astype(np.int32)),
                                       pa.py_buffer(u_data[pos]))


def _operand_struct(uniq: list[tuple], idx: np.ndarray, mask: pa.Array | None = None
                    ) -> pa.Array:
    """The OPERAND struct array of the operands ``uniq[idx]`` (``TensorHandle.operand``
    tuples). Each distinct operand is converted once and gathered."""
    space, pe, addr, shapes, dtype, transposed = (list(map(itemgetter(i), uniq))
                                                  for i in range(6))
    u_len = np.fromiter(map(len, shapes), np.int64, len(shapes))
    u_off = np.concatenate(([0], np.cumsum(u_len)))
    u_vals = np.fromiter(chain.from_iterable(shapes), np.int64, int(u_off[-1]))
    lens = u_len[idx]
    offsets = np.concatenate(([0], np.cumsum(lens)))
    pos = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - u_off[idx], lens)
    shape = pa.ListArray.from_arrays(array(offsets.astype(np.int32)), array(u_vals[pos]),
                                     pool=POOL)
    children = [
        take_strings(space, idx),
        array(np.array(pe, np.int32)[idx]),
        array(np.array(addr, np.int64)[idx]),
        shape,
        take_strings(dtype, idx),
        array(np.array(transposed, np.bool_)[idx]),
    ]
    return pa.StructArray.from_arrays(children, fields=_OPERAND_FIELDS, mask=mask,
                                     memory_pool=POOL)


class Operands:
    """One operand column, added chunk by chunk: each chunk's distinct operand tuples by
    identity (one numpy sort, no per-row dict) and the rows' indices into them. Holding the
    tuples keeps their ids valid."""

    __slots__ = ("uniq", "idx")

    def __init__(self) -> None:
        self.uniq: list[tuple] = []
        self.idx: list[np.ndarray] = []

    def add(self, keys: list[tuple]) -> None:
        ids = np.fromiter(map(id, keys), np.int64, len(keys))
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        self.idx.append(inverse.astype(np.int32) + len(self.uniq))
        self.uniq += map(keys.__getitem__, first.tolist())

    def indices(self) -> np.ndarray:
        return np.concatenate(self.idx) if self.idx else np.zeros(0, np.int32)

    def dtypes(self) -> set[str]:
        """The dtypes of the operands added (each distinct operand is some row's)."""
        return set(map(itemgetter(4), self.uniq))

    def operands(self, mask: pa.Array | None = None) -> pa.Array:
        """The rows' operands as an OPERAND struct array."""
        return _operand_struct(self.uniq, self.indices(), mask)


# the vocabulary as dictionaries: a row's name/kind/engine are codes into these. Their order
# is the enums' declaration order, never a set's or a dict built from sets (``KIND`` is
# filled by iterating frozensets, whose order follows PYTHONHASHSEED): the dictionary values
# are written into ops.parquet, so any hash order here would change its bytes (ADR-0500).
# Each batch writes only the values it uses (``used``), in this order.
_OPS_ORDER = list(Op)
CODE = {op: i for i, op in enumerate(_OPS_ORDER)}
NAME_DICT = pa.array([op.value for op in _OPS_ORDER], pa.string())
_KINDS, _ENGINES = list(Kind), list(Engine)
KIND_DICT = pa.array([k.value for k in _KINDS], pa.string())
ENGINE_DICT = pa.array([e.value for e in _ENGINES], pa.string())
KIND_OF = np.array([_KINDS.index(KIND[op]) for op in _OPS_ORDER], np.int32)
ENGINE_OF = np.array([_ENGINES.index(ENGINE[op]) for op in _OPS_ORDER], np.int32)
NO_OUTPUT = np.array([op in ops.NO_OUTPUT for op in _OPS_ORDER], np.bool_)
GUARDED_OF = np.array([op in ops.GUARDED for op in _OPS_ORDER], np.bool_)
VERSION_2_OF = np.array([op in VERSION_2 for op in _OPS_ORDER], np.bool_)


def used(codes: np.ndarray, vocabulary: pa.Array) -> pa.DictionaryArray:
    """Codes into the vocabulary's used values only, kept in vocabulary order: a trace's
    bytes then depend on the ops it uses, not on how many ops the table knows."""
    seen = np.bincount(codes, minlength=len(vocabulary)) > 0  # not np.unique: numpy.ma
    present = np.flatnonzero(seen)
    rank = np.cumsum(seen, dtype=np.int32) - 1
    words = vocabulary.to_pylist()
    return pa.DictionaryArray.from_arrays(
        array(rank[codes]),
        array([words[i] for i in present.tolist()], pa.string()), memory_pool=POOL)


def dictionary(values: list[str]) -> pa.DictionaryArray:
    """Strings dictionary-encoded in order of first appearance (as
    ``pyarrow.compute.dictionary_encode``: int32 codes)."""
    code = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return pa.DictionaryArray.from_arrays(
        array(np.fromiter(map(code.__getitem__, values), np.int32, len(values))),
        array(list(code), pa.string()), memory_pool=POOL)
