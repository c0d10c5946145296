"""Decode ``ops.parquet`` once into flat per-op lists the run loop indexes.

Struct columns are never turned into Python rows: the operand children are pulled as numpy
arrays, operands are de-duplicated with one ``np.unique`` over an integer key matrix, and
each distinct operand is resolved by the MemoryStore once. Each op's executor ``prepare``
runs here, cached by (op, attrs, operands); an op that cannot run gets a failing handler,
so its error surfaces when replay reaches it in time order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kernbench.errors import ReplayError, TraceFormatError
from kernbench.replay.executors import EXECUTORS, PrepareContext, Run
from kernbench.replay.store import MemoryStore, Operand
from kernbench.schemas.ops import Op

OPS_BY_NAME: dict[str, Op] = {op.value: op for op in Op}
_NO_OPERANDS: tuple[Operand, ...] = ()


@dataclass
class Program:
    """The decoded op log. Per-op lists are indexed by row; ``order`` is the replay order."""

    op_id: list[int]
    name: list[Op]
    src: list[str]
    t_start: list[int]
    t_end: list[int]
    run: list[Run]
    param: list[Any]
    ins: list[tuple[Operand, ...]]
    out: list[Operand | None]
    #: rows sorted by (t_start_ps, op_id)
    order: list[int]
    #: next_start[k]: t_start_ps of the op after order[k] (a large sentinel for the last)
    next_start: list[int]
    max_nbytes: int

    def where(self, row: int) -> str:
        return f"op {self.op_id[row]} ({self.name[row].value} at {self.src[row]})"


def _strings(col: pa.ChunkedArray | pa.Array) -> tuple[list[str], np.ndarray]:
    """A string or dictionary column as (distinct values, per-row codes)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks else pa.array([], pa.string())
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    enc = pc.dictionary_encode(col)
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False)


def _numbers(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _operand_matrix(st: pa.StructArray, spaces: dict[str, int], dtypes: dict[str, int]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """An int64 key row per operand: (space, pe, addr, dtype, transposed, ndim, shape...)."""
    n = len(st)
    space_vals, space_codes = _strings(st.field("space"))
    dtype_vals, dtype_codes = _strings(st.field("dtype"))
    smap = np.array([spaces.setdefault(s, len(spaces)) for s in space_vals] or [0], np.int64)
    dmap = np.array([dtypes.setdefault(d, len(dtypes)) for d in dtype_vals] or [0], np.int64)
    shape = st.field("shape")
    offsets = _numbers(shape.offsets).astype(np.int64)
    flat = _numbers(shape.values).astype(np.int64)
    ndim = np.diff(offsets)
    width = int(ndim.max()) if n else 0
    shapes = np.full((n, width), -1, dtype=np.int64)
    if width:
        rows = np.repeat(np.arange(n), ndim)
        cols = np.arange(len(rows)) - np.repeat(offsets[:-1] - offsets[0], ndim)
        shapes[rows, cols] = flat[offsets[0]:offsets[-1]]
    base = np.column_stack([
        smap[space_codes], _numbers(st.field("pe")).astype(np.int64),
        _numbers(st.field("addr")).astype(np.int64), dmap[dtype_codes],
        _numbers(st.field("transposed")).astype(np.int64), ndim,
    ]) if n else np.zeros((0, 6), np.int64)
    return base, shapes


def _unique_operands(store: MemoryStore, parts: list[tuple[np.ndarray, np.ndarray]],
                     spaces: dict[str, int], dtypes: dict[str, int]) -> list[Operand]:
    """Resolve every operand row of ``parts`` (key matrix, shapes) to a shared Operand."""
    width = max((s.shape[1] for _, s in parts), default=0)
    mats = [np.hstack([b, np.pad(s, ((0, 0), (0, width - s.shape[1])), constant_values=-1)])
            for b, s in parts]
    keys = np.vstack(mats) if mats else np.zeros((0, 6), np.int64)
    if not len(keys):
        return []
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    space_names = {v: k for k, v in spaces.items()}
    dtype_names = {v: k for k, v in dtypes.items()}
    resolved = []
    for row in uniq.tolist():
        sp, pe, addr, dt, tr, nd = row[:6]
        resolved.append(store.operand(space_names[sp], pe, addr, tuple(row[6:6 + nd]),
                                      dtype_names[dt], bool(tr)))
    return [resolved[j] for j in inverse.reshape(-1).tolist()]


def _fail(vals: list, out: Any, message: str) -> None:
    raise ReplayError(message)


def decode(table: pa.Table, store: MemoryStore) -> Program:
    """Decode the ops table against ``store``; TraceFormatError for an unknown op name."""
    n = table.num_rows
    op_id = _numbers(table.column("op_id").combine_chunks()).astype(np.int64)
    pe = _numbers(table.column("pe").combine_chunks()).astype(np.int64).tolist()
    t_start = _numbers(table.column("t_start_ps").combine_chunks()).astype(np.int64)
    t_end = _numbers(table.column("t_end_ps").combine_chunks()).astype(np.int64)
    name_vals, name_codes = _strings(table.column("name"))
    unknown = [v for v in name_vals if v not in OPS_BY_NAME]
    if unknown:
        raise TraceFormatError(f"ops.parquet: unknown op name(s) {unknown}; this kernbench "
                               "cannot replay them")
    names = [OPS_BY_NAME[name_vals[c]] for c in name_codes.tolist()]
    src_vals, src_codes = _strings(table.column("src"))
    srcs = [src_vals[c] for c in src_codes.tolist()]
    attr_vals, attr_codes = _strings(table.column("attrs"))

    inputs = table.column("inputs").combine_chunks()
    output = table.column("output").combine_chunks()
    in_offsets = _numbers(inputs.offsets).astype(np.int64)
    spaces: dict[str, int] = {}
    dtypes: dict[str, int] = {}
    in_values = inputs.values.slice(int(in_offsets[0]), int(in_offsets[-1] - in_offsets[0]))
    in_base, in_shapes = _operand_matrix(in_values, spaces, dtypes)
    out_valid = ~_numbers(output.is_null()).astype(bool)
    out_rows = np.flatnonzero(out_valid)
    out_base, out_shapes = _operand_matrix(output.filter(pa.array(out_valid)), spaces, dtypes)
    flat = _unique_operands(store, [(in_base, in_shapes), (out_base, out_shapes)],
                            spaces, dtypes)
    n_in = len(in_base)
    in_objs, out_objs = flat[:n_in], flat[n_in:]
    outs: list[Operand | None] = [None] * n
    for row, o in zip(out_rows.tolist(), out_objs, strict=True):
        outs[row] = o
    rel = (in_offsets - in_offsets[0]).tolist()
    ins = [tuple(in_objs[rel[i]:rel[i + 1]]) if rel[i + 1] > rel[i] else _NO_OPERANDS
           for i in range(n)]

    program = Program(op_id.tolist(), names, srcs, t_start.tolist(), t_end.tolist(),
                      [], [], ins, outs, [], [], 0)
    _prepare_all(program, pe, attr_vals, attr_codes.tolist(), store)
    order = np.lexsort((op_id, t_start))
    starts = t_start[order]
    program.order = order.tolist()
    program.next_start = np.append(starts[1:], np.iinfo(np.int64).max).tolist()
    sizes = [o.nbytes for o in flat if o.error is None]
    program.max_nbytes = max(sizes, default=0)
    return program


def _prepare_all(program: Program, pe: list[int], attr_vals: list[str], attr_codes: list[int],
                 store: MemoryStore) -> None:
    """Fill ``program.run``/``param``: each op's executor prepared once per distinct use."""
    attrs_cache: dict[int, dict | Exception] = {}
    contexts: dict[int, PrepareContext] = {}
    cache: dict[tuple, tuple[Run, Any]] = {}
    runs, params = program.run, program.param
    for i, (op, ins, out, code, p) in enumerate(zip(program.name, program.ins, program.out,
                                                     attr_codes, pe, strict=True)):
        key = (op, code, ins, out, p)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _prepare_one(op, ins, out, code, p, attr_vals, attrs_cache,
                                            contexts, store)
        run, param = hit
        if run is _fail:
            param = f"{program.where(i)}: {param}"
        runs.append(run)
        params.append(param)


def _prepare_one(op: Op, ins: tuple[Operand, ...], out: Operand | None, code: int, pe: int,
                 attr_vals: list[str], attrs_cache: dict, contexts: dict,
                 store: MemoryStore) -> tuple[Run, Any]:
    for k, o in enumerate(ins):
        if o.error is not None:
            return _fail, f"input {k} {o.describe()}: {o.error}"
    if out is not None and out.error is not None:
        return _fail, f"output {out.describe()}: {out.error}"
    attrs = attrs_cache.get(code)
    if attrs is None:
        try:
            attrs = json.loads(attr_vals[code])
            if not isinstance(attrs, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            attrs = ValueError(f"unreadable attrs {attr_vals[code][:80]!r} ({exc})")
        attrs_cache[code] = attrs
    if isinstance(attrs, Exception):
        return _fail, str(attrs)
    ctx = contexts.get(pe)
    if ctx is None:
        ctx = contexts[pe] = PrepareContext(store, pe)
    executor = EXECUTORS[op]
    try:
        return executor.run, executor.prepare(attrs, ins, out, ctx)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        return _fail, str(exc.args[0]) if exc.args else repr(exc)
