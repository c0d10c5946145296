"""trace/columns.py: ``unique_rows`` against numpy's own ``np.unique(axis=0)``."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.trace.columns import unique_rows


def _check(mat: np.ndarray) -> None:
    uniq, inverse = unique_rows(mat)
    want, want_inv = np.unique(mat, axis=0, return_inverse=True)
    assert uniq.dtype == mat.dtype
    np.testing.assert_array_equal(uniq, want)  # lexicographic order
    np.testing.assert_array_equal(inverse, want_inv.reshape(-1))
    np.testing.assert_array_equal(uniq[inverse], mat)


@pytest.mark.parametrize("seed", range(6))
def test_unique_rows_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, w = int(rng.integers(1, 400)), int(rng.integers(1, 9))
    mat = rng.integers(-3, 4, size=(n, w)).astype(np.int64)
    mat[:, rng.integers(0, w)] = 7  # a constant column
    _check(mat)


def test_unique_rows_wide_values_take_the_lexsort_path() -> None:
    rng = np.random.default_rng(1)
    mat = rng.integers(0, 3, size=(300, 4)).astype(np.int64) * (1 << 40) - (1 << 41)
    _check(mat)


def test_unique_rows_extreme_values_and_empty() -> None:
    big = np.iinfo(np.int64)
    _check(np.array([[big.max, 0], [big.min, 1], [big.max, 0], [0, 1]], np.int64))
    _check(np.array([[5, -1]] * 4, np.int64))
    uniq, inverse = unique_rows(np.zeros((0, 3), np.int64))
    assert uniq.shape == (0, 3) and inverse.shape == (0,)
