"""Decode ``ops.parquet`` once into flat per-op lists the run loop indexes.

Struct columns are never turned into Python rows: the operand children are pulled as numpy
arrays and every operand becomes one row of an integer key matrix. Distinct operands are
found with one sort and resolved by the MemoryStore once; distinct op *signatures* (name,
attrs, pe, operands) likewise, and each signature's executor is bound once. The per-op
Python work is a handful of list look-ups. An op that cannot run gets a failing step, so
its error surfaces when replay reaches it in time order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.errors import ReplayError, TraceFormatError
from kernbench.replay import batching
from kernbench.replay.executors import EXECUTORS, BindContext, Step
from kernbench.replay.nogc import no_gc
from kernbench.replay.program import BATCHES, CLASSES, COLUMNS, Program
from kernbench.replay.store import MemoryStore, Operand
from kernbench.schemas.elements import EMPTY, AccessTable
from kernbench.schemas.ops import BY_NAME, Op
from kernbench.trace.columns import chunk, distinct, nulls, unique_rows
from kernbench.trace.columns import ints as _ints
from kernbench.trace.opbatch import Strs


def _strings(col: pa.ChunkedArray | pa.Array) -> tuple[list[str], np.ndarray]:
    """A string or dictionary column as (distinct values, per-row codes)."""
    got = Strs.of(chunk(col))
    return got.values, got.codes


def _operand_keys(st: pa.StructArray, names: dict[str, dict[str, int]]) -> np.ndarray:
    """One int64 key column per operand, as rows of a ``(6 + max ndim, n)`` array: (space,
    pe, addr, dtype, transposed, ndim, shape...) with -1 past an operand's ndim. Built
    column by column, so ``unique_rows`` of its transpose sorts without a copy."""
    n = len(st)
    shape = st.field("shape")
    offsets = _ints(shape.offsets)
    ndim = np.diff(offsets)
    width = int(ndim.max()) if n else 0
    keys = np.full((6 + width, n), -1, dtype=np.int64)
    if not n:
        return keys
    for row, field in ((0, "space"), (3, "dtype")):
        vals, codes = _strings(st.field(field))
        table = names[field]
        cmap = np.array([table.setdefault(v, len(table)) for v in vals] or [0], np.int64)
        keys[row] = cmap[codes]
    keys[1], keys[2] = _ints(st.field("pe")), _ints(st.field("addr"))
    keys[4], keys[5] = _ints(st.field("transposed")), ndim
    if width:
        ops = np.repeat(np.arange(n), ndim)
        dims = np.arange(len(ops)) - np.repeat(offsets[:-1] - offsets[0], ndim)
        keys[6 + dims, ops] = _ints(shape.values)[offsets[0]:offsets[-1]]
    return keys


def _operands(store: MemoryStore, cols: _Columns, used: np.ndarray) -> dict[int, Operand]:
    """The store's operands of the distinct operand keys ``used`` (the ones a window names),
    by key number."""
    space = {v: k for k, v in cols.names["space"].items()}
    dtype = {v: k for k, v in cols.names["dtype"].items()}
    found = {}
    for j, row in zip(used.tolist(), cols.keys[used].tolist(), strict=True):
        sp, pe, addr, dt, tr, nd = row[:6]
        found[j] = store.operand(space[sp], pe, addr, tuple(row[6:6 + nd]), dtype[dt],
                                 bool(tr))
    return found


@dataclass
class _Columns:
    """Every row of an ops table decoded once, without the store: integer columns, string
    codes, the distinct operand keys (one row each) and each row's signature over them
    (name code, attrs code, pe, output key, input keys; -1 where none), column-major."""

    table: pa.Table
    op_id: np.ndarray
    program: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray
    name_vals: list[str]
    name_code: np.ndarray
    src_vals: list[str]
    src_code: np.ndarray
    attr_vals: list[str]
    keys: np.ndarray
    names: dict[str, dict[str, int]]
    sig: np.ndarray


def _columns(table: pa.Table) -> _Columns:
    n = table.num_rows
    name_vals, name_code = _strings(table.column("name"))
    src_vals, src_code = _strings(table.column("src"))
    attr_vals, attr_code = _strings(table.column("attrs"))
    inputs = chunk(table.column("inputs"))
    output = chunk(table.column("output"))
    in_off = _ints(inputs.offsets)
    in_values = inputs.values.slice(int(in_off[0]), int(in_off[-1] - in_off[0]))
    has_out = ~nulls(output)
    names: dict[str, dict[str, int]] = {"space": {}, "dtype": {}}
    in_keys = _operand_keys(in_values, names)
    out_keys = _operand_keys(output, names)[:, has_out]
    n_ins = in_keys.shape[1]
    keys = np.full((max(len(in_keys), len(out_keys)), n_ins + out_keys.shape[1]), -1,
                   dtype=np.int64)
    keys[:len(in_keys), :n_ins] = in_keys
    keys[:len(out_keys), n_ins:] = out_keys
    uniq, operand_id = unique_rows(keys.T)

    n_in = np.diff(in_off)
    max_in = int(n_in.max()) if n else 0
    sig = np.full((4 + max_in, n), -1, dtype=np.int64)
    sig[0], sig[1], sig[2] = name_code, attr_code, _ints(table.column("pe"))
    sig[3, np.flatnonzero(has_out)] = operand_id[n_ins:]
    if max_in:
        rows = np.repeat(np.arange(n), n_in)
        sig[4 + np.arange(len(rows)) - np.repeat(in_off[:-1] - in_off[0], n_in), rows] = (
            operand_id[:n_ins])
    return _Columns(table, _ints(table.column("op_id")), _ints(table.column("program")),
                    _ints(table.column("t_start_ps")),
                    _ints(table.column("t_end_ps")), name_vals, name_code, src_vals,
                    src_code, attr_vals, uniq, names, sig)


def _cached(table: pa.Table, bound_cache: dict | None) -> _Columns:
    """The table's columns, decoded once per table while the bound signatures are kept (a
    small file's windows are one table, ADR-0711)."""
    if bound_cache is None:
        return _columns(table)
    got = bound_cache.get(COLUMNS)
    if got is None or got.table is not table:
        got = bound_cache[COLUMNS] = _columns(table)
    return got


def _used(vals: list[str], codes: np.ndarray, rows: np.ndarray | None
          ) -> tuple[list[str], np.ndarray]:
    """A string column's (values, codes) at ``rows``, keeping only the values used there."""
    if rows is None:
        return vals, codes
    codes = codes[rows]
    used = distinct(codes[codes >= 0])
    remap = np.full(len(vals) + 1, -1, np.int64)
    remap[used] = np.arange(len(used))
    return [vals[j] for j in used.tolist()], remap[codes]


def _fail(message: str) -> None:
    raise ReplayError(message)


def decode(table: pa.Table, store: MemoryStore, bound_cache: dict | None = None,
           access: AccessTable = EMPTY, rows: np.ndarray | None = None) -> Program:
    """See ``_decode``; the cyclic collector paused meanwhile (replay/nogc.py)."""
    with no_gc():
        return _decode(table, store, bound_cache, access, rows)


def _decode(table: pa.Table, store: MemoryStore, bound_cache: dict | None = None,
            access: AccessTable = EMPTY, rows: np.ndarray | None = None) -> Program:
    """Decode the ops table against ``store``; TraceFormatError for an unknown op name.
    ``bound_cache``: signatures bound in earlier windows (keyed by the store's operand
    objects), reused and added to. ``access``: the trace's access.parquet arrays.
    ``rows``: the rows of ``table`` to decode, in this order (None: every row)."""
    cols = _cached(table, bound_cache)
    op_id = cols.op_id if rows is None else cols.op_id[rows]
    programs = cols.program if rows is None else cols.program[rows]
    t_start = cols.t_start if rows is None else cols.t_start[rows]
    t_end = cols.t_end if rows is None else cols.t_end[rows]
    src_code = cols.src_code if rows is None else cols.src_code[rows]
    name_vals, name_code = _used(cols.name_vals, cols.name_code, rows)
    unknown = [v for v in name_vals if v not in BY_NAME]
    if unknown:
        raise TraceFormatError(f"ops.parquet: unknown op name(s) {unknown}; this kernbench "
                               "cannot replay them")
    # one signature row per op: (name, attrs, pe, output id, input ids...), column-major
    sig = cols.sig.copy() if rows is None else cols.sig[:, rows]
    sig[0] = name_code
    named = sig[3:]
    operands = _operands(store, cols, distinct(named[named >= 0]))
    sigs, sig_id = unique_rows(sig.T)
    attr_vals = cols.attr_vals
    binder = _Binder(name_vals, attr_vals, operands, store, access,
                     {} if bound_cache is None else bound_cache.setdefault(CLASSES, {}))
    bind = binder.bind
    if bound_cache is None:
        bound = [bind(row) for row in sigs.tolist()]
    else:
        bound = []
        get, found = bound_cache.get, bound.append
        for row in sigs.tolist():
            key = (name_vals[row[0]], attr_vals[row[1]], row[2],
                   operands[row[3]] if row[3] >= 0 else None,
                   *[operands[j] for j in row[4:] if j >= 0])
            got = get(key)
            if got is None:
                got = bound_cache[key] = bind(row)
            found(got)
    order = np.lexsort((op_id, t_start))
    steps, ins, checks, outs, batch = (list(c) for c in zip(*bound, strict=True)) if bound \
        else ([], [], [], [], [])
    return Program(
        op_id=op_id, programs=programs, names=[BY_NAME[v] for v in name_vals],
        name_code=name_code,
        srcs=cols.src_vals, src_code=src_code, t_start=t_start, t_end=t_end, sig_id=sig_id,
        sig_step=steps, sig_ins=ins, sig_checks=checks, sig_out=outs, order=order,
        sig_batch=batch,
        batches={} if bound_cache is None else bound_cache.setdefault(BATCHES, {}))


class _Binder:
    """Binds op signatures to steps, caching parsed attrs and contexts."""

    def __init__(self, name_vals: list[str], attr_vals: list[str], operands: dict[int, Operand],
                 store: MemoryStore, access: AccessTable = EMPTY,
                 classes: dict[tuple, int] | None = None) -> None:
        self.ops = [BY_NAME[v] for v in name_vals]
        self.attr_vals, self.operands, self.store = attr_vals, operands, store
        self.access = access
        self.attrs: dict[int, Any] = {}
        self.contexts: dict[int, BindContext] = {}
        self.keys = batching.KeyMemo({}, {})
        #: class keys numbered, kept with the bound signatures (a window's signatures and
        #: those bound in earlier windows share the numbers)
        self.classes: dict[tuple, int] = {} if classes is None else classes

    def bind(self, row: list[int]) -> tuple[Step, tuple[Operand, ...], tuple[Operand, ...],
                                            Operand | None, Any]:
        """One op signature (name, attrs, pe, out, ins...) -> (step, ins, checked ins, out,
        batch class: (class id, op, attrs, context) or None)."""
        operands = self.operands
        op = self.ops[row[0]]
        ins = tuple([operands[j] for j in row[4:] if j >= 0])
        ex = EXECUTORS[op]
        out = operands[row[3]] if row[3] >= 0 and ex.writes else None
        attrs = self._attrs(row[1])
        if ex.operands is not None and isinstance(attrs, dict):
            try:  # indexed rows: their HBM operand is a set of elements
                ins, out = ex.operands(attrs, ins, out, self._context(row[2]))
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                msg = str(exc.args[0]) if exc.args else repr(exc)
                return _failing(msg), ins, (), out, None
        checks = tuple([o for o in ins if o.mem is None or o.mem.check_reads])
        k = batching.key(op, attrs, self.attr_vals[row[1]], ins, out, self.keys)
        if k is None:
            return self._step(op, row[1], row[2], ins, out), ins, checks, out, None
        # may run batched: bound when the engine first needs it alone
        step = batching.Late(partial(self._step, op, row[1], row[2], ins, out))
        cid = self.classes.setdefault(k, len(self.classes))
        return step, ins, checks, out, (cid, op, attrs, self._context(row[2]))

    def _attrs(self, attr_code: int) -> dict | str:
        attrs = self.attrs.get(attr_code)
        if attrs is None:
            attrs = self.attrs[attr_code] = _parse_attrs(self.attr_vals[attr_code])
        return attrs

    def _context(self, pe: int) -> BindContext:
        ctx = self.contexts.get(pe)
        if ctx is None:
            ctx = self.contexts[pe] = BindContext(self.store, pe, self.access)
        return ctx

    def _step(self, op: Op, attr_code: int, pe: int, ins: tuple[Operand, ...],
              out: Operand | None) -> Step:
        for k, o in enumerate(ins):
            if o.error is not None:
                return _failing(f"input {k} {o.describe()}: {o.error}")
        if out is not None and out.error is not None:
            return _failing(f"output {out.describe()}: {out.error}")
        attrs = self._attrs(attr_code)
        if isinstance(attrs, str):
            return _failing(attrs)
        ctx = self._context(pe)
        try:
            return EXECUTORS[op].bind(attrs, ins, out, ctx)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            return _failing(str(exc.args[0]) if exc.args else repr(exc))


def _parse_attrs(text: str) -> dict | str:
    """The attrs object, or an error message."""
    try:
        attrs = json.loads(text)
    except ValueError as exc:
        return f"unreadable attrs {text[:80]!r} ({exc})"
    return attrs if isinstance(attrs, dict) else f"attrs {text[:80]!r} is not a JSON object"


class _Failing:
    """The step of an op that cannot run: raises its error when replay reaches it."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __call__(self) -> None:
        _fail(self.message)


def _failing(message: str) -> Step:
    return _Failing(message)
