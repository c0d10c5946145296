"""One op-log record batch as the validator's rules read it (``kernbench.trace.rows``).

Columns become numpy arrays once (``kernbench.trace.columns``): integers with a null mask,
strings as codes into their distinct values, the operands of every row (each non-null
input element, then each non-null output) as one flat table. A rule is then a numpy mask
over rows or operands; only the findings kept are formatted (ADR-0630).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.trace.columns import chunk, ints, list_parts, nulls, strings

#: times, sizes and addresses above this are refused (sums of two stay inside int64)
MAX_VALUE = 1 << 62


def fmt(template: str, *values: Any) -> str | None:
    """``template`` with ``{}`` filled in; None when a value is null (the rule's fallback
    message is used then)."""
    if any(v is None for v in values):
        return None
    return template.format(*values)


@dataclass(frozen=True)
class Ints:
    """An integer column: values (0 where null) and its null mask."""

    vals: np.ndarray
    null: np.ndarray

    @classmethod
    def of(cls, arr: pa.Array) -> Ints:
        return cls(ints(arr), nulls(arr))

    def get(self, i: int) -> int | None:
        return None if self.null[i] else int(self.vals[i])

    def take(self, idx: np.ndarray) -> Ints:
        return Ints(self.vals[idx], self.null[idx])

    def where(self, test: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Rows where the value is not null and passes ``test``."""
        return ~self.null & test(self.vals)

    def cat(self, other: Ints) -> Ints:
        return Ints(np.concatenate([self.vals, other.vals]),
                    np.concatenate([self.null, other.null]))


@dataclass(frozen=True)
class Strs:
    """A string column: distinct values and per-row codes into them (-1: null)."""

    values: list[str]
    codes: np.ndarray

    @classmethod
    def of(cls, arr: pa.Array) -> Strs:
        values, codes = strings(arr)
        if len(set(values)) != len(values):  # a dictionary that repeats a value
            first: dict[str, int] = {}
            remap = np.array([first.setdefault(v, len(first)) for v in values], np.int64)
            codes = np.where(codes >= 0, remap[np.maximum(codes, 0)], -1)
            values = list(first)
        return cls(values, codes)

    @property
    def null(self) -> np.ndarray:
        return self.codes < 0

    def get(self, i: int) -> str | None:
        c = int(self.codes[i])
        return None if c < 0 else self.values[c]

    def map(self, fn: Callable[[str], Any], null: Any, dtype: Any = None) -> np.ndarray:
        """``fn`` of each row's value (``null`` for a null row), evaluated once per value."""
        table = np.array([fn(v) for v in self.values] + [null], dtype=dtype)
        return table[self.codes]

    def isin(self, options: Sequence[str] | frozenset[str] | set[str]) -> np.ndarray:
        """Rows whose value is one of ``options`` (False where null)."""
        opts = set(options)
        return self.map(lambda v: v in opts, False, bool)

    def take(self, idx: np.ndarray) -> Strs:
        return Strs(self.values, self.codes[idx])

    def cat(self, other: Strs) -> Strs:
        where = {v: k for k, v in enumerate(self.values)}
        remap = np.array([where.setdefault(v, len(where)) for v in other.values] or [0],
                         np.int64)
        values = list(where)
        codes = np.where(other.codes >= 0, remap[np.maximum(other.codes, 0)], -1)
        return Strs(values, np.concatenate([self.codes, codes]))


@dataclass(frozen=True)
class Shapes:
    """A ``shape`` list column: per row its start and length in the flat values, its null
    mask, whether an element is null/negative/absurd, and the float product of its
    elements (nulls as 1, left to right)."""

    start: np.ndarray
    lens: np.ndarray
    null: np.ndarray
    flat: Ints

    @classmethod
    def of(cls, arr: pa.Array) -> Shapes:
        start, lens, values = list_parts(arr)
        return cls(start, lens, nulls(arr), Ints.of(values))

    @cached_property
    def bad(self) -> np.ndarray:
        """An element is null, negative or absurd (a null row: False)."""
        v = self.flat
        flag = v.null | (v.vals < 0) | (v.vals >= MAX_VALUE)
        cs = np.concatenate([[0], np.cumsum(flag)])
        return (cs[self.start + self.lens] - cs[self.start]) > 0

    @cached_property
    def product(self) -> np.ndarray:
        prod = np.ones(len(self.start))
        width = int(self.lens.max()) if len(self.lens) else 0
        last = max(len(self.flat.vals) - 1, 0)
        for j in range(width):
            at = np.minimum(self.start + j, last)
            has = (self.lens > j) & ~self.flat.null[at]
            prod = prod * np.where(has, self.flat.vals[at].astype(np.float64), 1.0)
        return prod

    def get(self, i: int) -> list[int | None] | None:
        if self.null[i]:
            return None
        s = int(self.start[i])
        return [self.flat.get(s + j) for j in range(int(self.lens[i]))]

    def take(self, idx: np.ndarray) -> Shapes:
        return Shapes(self.start[idx], self.lens[idx], self.null[idx], self.flat)

    def cat(self, other: Shapes) -> Shapes:
        shift = len(self.flat.vals)
        return Shapes(np.concatenate([self.start, other.start + shift]),
                      np.concatenate([self.lens, other.lens]),
                      np.concatenate([self.null, other.null]), self.flat.cat(other.flat))


@dataclass(frozen=True)
class Operands:
    """Operands (rows of an ``OPERAND`` struct) with the op row each belongs to."""

    row: np.ndarray
    space: Strs
    pe: Ints
    addr: Ints
    shape: Shapes
    dtype: Strs
    transposed_null: np.ndarray

    @classmethod
    def of(cls, st: pa.Array, row: np.ndarray) -> Operands:
        return cls(row, Strs.of(st.field("space")), Ints.of(st.field("pe")),
                   Ints.of(st.field("addr")), Shapes.of(st.field("shape")),
                   Strs.of(st.field("dtype")), nulls(st.field("transposed")))

    def __len__(self) -> int:
        return len(self.row)

    def take(self, idx: np.ndarray, row: np.ndarray | None = None) -> Operands:
        return Operands(self.row[idx] if row is None else row, self.space.take(idx),
                        self.pe.take(idx), self.addr.take(idx), self.shape.take(idx),
                        self.dtype.take(idx), self.transposed_null[idx])

    def cat(self, other: Operands) -> Operands:
        return Operands(np.concatenate([self.row, other.row]), self.space.cat(other.space),
                        self.pe.cat(other.pe), self.addr.cat(other.addr),
                        self.shape.cat(other.shape), self.dtype.cat(other.dtype),
                        np.concatenate([self.transposed_null, other.transposed_null]))


@dataclass(frozen=True)
class Regions:
    """The HBM tensors' byte ranges ``[lo, hi)``, sorted by ``lo``."""

    lo: np.ndarray
    hi: np.ndarray

    def holding(self, addr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(found, lo, hi) of the last region starting at or below each address (an as-of
        join); ``found`` False where there is none."""
        at = np.searchsorted(self.lo, addr, side="right") - 1
        found = at >= 0
        at = np.maximum(at, 0)
        if not len(self.lo):
            return found, np.zeros(len(addr), np.int64), np.zeros(len(addr), np.int64)
        return found, self.lo[at], self.hi[at]


class OpBatch:
    """One record batch of ops.parquet, its columns decoded once as the rules need them."""

    def __init__(self, batch: pa.RecordBatch | pa.Table, base: int) -> None:
        self.cols = {name: chunk(batch.column(name)) for name in batch.schema.names}
        self.n = batch.num_rows
        self.base = base
        self._ints: dict[str, Ints] = {}
        self._strs: dict[str, Strs] = {}

    def ints(self, name: str) -> Ints:
        got = self._ints.get(name)
        if got is None:
            got = self._ints[name] = Ints.of(self.cols[name])
        return got

    def strs(self, name: str) -> Strs:
        got = self._strs.get(name)
        if got is None:
            got = self._strs[name] = Strs.of(self.cols[name])
        return got

    def op(self, i: int) -> int | None:
        """The op_id of local row ``i`` (None when null)."""
        return self.ints("op_id").get(i)

    @cached_property
    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, length, null) of each row's inputs list (length 0 for a null list)."""
        col = self.cols["inputs"]
        start, lens, _ = list_parts(col)
        return start, lens, nulls(col)

    @cached_property
    def elements(self) -> Operands:
        """Every input element (null ones too), by its position in the inputs' values."""
        values = self.cols["inputs"].values
        owner = np.full(len(values), -1, np.int64)
        start, lens, _ = self.inputs
        owner[np.repeat(start, lens) + _ranks(lens)] = np.repeat(np.arange(self.n), lens)
        return Operands.of(values, owner)

    @cached_property
    def element_null(self) -> np.ndarray:
        return nulls(self.cols["inputs"].values)

    @cached_property
    def output(self) -> Operands:
        return Operands.of(self.cols["output"], np.arange(self.n))

    @cached_property
    def output_null(self) -> np.ndarray:
        return nulls(self.cols["output"])

    @cached_property
    def operands(self) -> Operands:
        """Each non-null input element in row order, then each non-null output."""
        start, lens, _ = self.inputs
        pos = np.repeat(start, lens) + _ranks(lens)
        ins = pos[~self.element_null[pos]]
        outs = np.flatnonzero(~self.output_null)
        return self.elements.take(ins).cat(self.output.take(outs))

    def first_input(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows of ``rows`` whose first input is a non-null element, those elements)."""
        start, lens, _ = self.inputs
        rows = rows[lens[rows] > 0]
        at = start[rows]
        keep = ~self.element_null[at]
        return rows[keep], at[keep]


def _ranks(lens: np.ndarray) -> np.ndarray:
    """0..len-1 for each group of ``lens``, concatenated."""
    total = int(lens.sum())
    if not total:
        return np.zeros(0, np.int64)
    firsts = np.repeat(np.cumsum(lens) - lens, lens)
    return np.arange(total) - firsts
