"""``kernbench.analyze.footprint``: an operand's runs of distinct elements and how often each
moves, against numpy's ``unique`` of the tile's offsets built element by element; the
closed form builds nothing for a stride-0 or nested tile; ``pieces`` expands many rows in
bounded chunks, clipped to a window, as the naive concatenation does."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernbench.analyze import footprint as fp
from kernbench.errors import TraceFormatError
from kernbench.schemas import elements as ix


def _naive(shape, strides, base=0, mask=None):
    """Offsets of every masked-in tile element, index by index."""
    out = [base + sum(i * s for i, s in zip(idx, strides, strict=True))
           for idx in itertools.product(*map(range, shape))
           if mask is None or mask[idx]]
    return np.array(out, np.int64)


def _expanded(f: fp.Footprint) -> tuple[np.ndarray, np.ndarray]:
    elems = np.concatenate([np.arange(s, s + n) for s, n in zip(f.starts, f.lengths,
                                                                strict=True)] or [[]])
    return elems.astype(np.int64), np.repeat(f.weights, f.lengths)


def _table(mask: np.ndarray) -> ix.AccessTable:
    return ix.AccessTable({7: ("mask", *ix.encode("mask", mask))})


GEOMETRIES = [  # (shape, strides, base)
    ((4, 6), (10, 1), 0), ((4, 6), (6, 1), 3), ((6, 4), (1, 6), 0), ((3, 5), (0, 2), 1),
    ((5, 3), (1, 1), 0), ((4, 4), (-4, 1), 12), ((2, 3, 4), (0, 0, 0), 5),
    ((3, 4), (2, 3), 0), ((2, 2, 3), (20, 3, 1), 0), ((2, 3), (3, 1), 0), ((1, 7), (99, -2), 14),
    ((3, 4, 2), (1, 0, 1), 2),
]


@pytest.mark.parametrize(("shape", "strides", "base"), GEOMETRIES)
@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
def test_footprint_counts_every_distinct_element_as_often_as_the_tile_moves_it(
        shape, strides, base, masked) -> None:
    mask = (np.random.default_rng(len(shape) + base).random(shape) < 0.6) if masked else None
    attrs = {"strides": list(strides), "base": base, **({"mask": 7} if masked else {})}
    got = fp.footprint(attrs, shape, _table(mask) if masked else ix.EMPTY)
    want, counts = np.unique(_naive(shape, strides, base, mask), return_counts=True)
    elems, weights = _expanded(got)
    np.testing.assert_array_equal(elems, want)
    np.testing.assert_array_equal(weights, counts)
    assert got.moved == counts.sum() and got.distinct == len(want)
    starts, ends = got.runs()
    cut = np.flatnonzero(np.diff(want) != 1) + 1
    np.testing.assert_array_equal(starts, want[np.concatenate(([0], cut))])
    np.testing.assert_array_equal(ends, want[np.concatenate((cut - 1, [len(want) - 1]))] + 1)


def test_a_stride_0_tile_is_one_element_moved_by_every_tile_element_without_building_it(
        ) -> None:
    side = 1 << 13
    got = fp.footprint({"strides": [0, 0]}, (side, side), kept=fp.Kept("tile"))
    assert (got.starts.tolist(), got.lengths.tolist(), got.weights.tolist()) == (
        [0], [1], [side * side])
    row_major = fp.footprint({"strides": [side, 1], "base": 4}, (side, side))
    assert (row_major.starts.tolist(), row_major.lengths.tolist()) == ([4], [side * side])


def test_an_access_array_footprint_merges_repeats() -> None:
    offs = np.array([[5, 3, 4], [3, 9, 5]], np.int64)
    table = ix.AccessTable({1: ("offsets", *ix.encode("offsets", offs))})
    got = fp.footprint({"access": 1}, (2, 3), table)
    assert _expanded(got)[0].tolist() == [3, 4, 5, 9]
    assert _expanded(got)[1].tolist() == [2, 1, 2, 1]


def test_plain_and_loaded_offset_operands() -> None:
    assert fp.footprint({}, (3, 4)).runs()[0].tolist() == [0]
    assert fp.footprint({}, (3, 4)).moved == 12
    assert fp.footprint({"offsets": "input", "strides": [1]}, (8,)).moved == 0


def test_building_a_footprint_over_the_budget_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", str(1 / 1024))  # 1 MiB
    with pytest.raises(TraceFormatError, match=r"tile needs .* over the 0.000977 GiB limit"):
        fp.footprint({"strides": [3]}, (1 << 16,), kept=fp.Kept("tile"))
    assert fp.footprint({"strides": [0]}, (1 << 30,), kept=fp.Kept("tile")).moved == 1 << 30


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_pieces_expand_rows_in_bounded_chunks_clipped_to_the_window(monkeypatch, chunk) -> None:
    monkeypatch.setattr(fp, "CHUNK", chunk)
    prints = [fp.footprint({"strides": [5, 1]}, (3, 2)), fp.contiguous(9),
              fp.footprint({"strides": [0]}, (4,))]
    first = np.array([0, 40, -3, 7, 100, 2], np.int64)
    which = np.array([0, 1, 1, -1, 0, 2], np.int64)
    lo, hi = 0, 45
    got = list(fp.pieces(first, prints, which, lo, hi))
    assert all(len(e) <= chunk for e, _, _ in got)
    elems = np.concatenate([e for e, _, _ in got])
    weights = np.concatenate([w for _, w, _ in got])
    rows = np.concatenate([r for _, _, r in got])
    want = [(first[r] + e, w, r) for r in range(len(first)) if which[r] >= 0
            for e, w in zip(*_expanded(prints[which[r]]), strict=True)
            if lo <= first[r] + e < hi]
    assert list(zip(elems.tolist(), weights.tolist(), rows.tolist(), strict=True)) == [
        (int(e), int(w), int(r)) for e, w, r in want]
