"""values.parquet: per-op checksum and statistics, computed in bulk."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import polars as pl
import pytest

from kernbench.replay import replay
from kernbench.replay.values import _Powers, checksums, reduce_batch
from kernbench.trace.parquet import read_table


def one(a: np.ndarray) -> int:
    flat = a.reshape(-1)
    return int(checksums(flat, np.array([0]), np.array([flat.size]))[0])


def test_the_checksum_is_deterministic_and_sees_every_element() -> None:
    a = np.arange(64, dtype=np.float32)
    assert one(a) == one(a.copy())
    for k in (0, 31, 63):
        b = a.copy()
        b[k] = np.nextafter(b[k], np.float32(1e9))
        assert one(b) != one(a)


def test_the_checksum_depends_on_order_and_length() -> None:
    a = np.arange(8, dtype=np.int32)
    assert one(a[::-1].copy()) != one(a)
    assert one(np.zeros(4, np.int32)) != one(np.zeros(5, np.int32))


def test_a_segment_hashes_the_same_wherever_it_sits_in_a_batch() -> None:
    a = np.random.default_rng(0).standard_normal(37).astype(np.float32)
    batch = np.concatenate([np.ones(11, np.float32), a])
    together = checksums(batch, np.array([0, 11]), np.array([11, 37]), _Powers())
    assert int(together[1]) == one(a)


def test_statistics_per_dtype_in_commit_order() -> None:
    arrays = [np.array([1.0, np.inf, np.nan], np.float32),
              np.array([[True, False]]),
              np.array([1.5, -2.5], ml_dtypes.bfloat16),
              np.array([3, 4], np.int32)]
    rows, checksum, mins, maxs, means, nonfinite = reduce_batch([7, 3, 5, 1], arrays, _Powers())
    assert rows.tolist() == [7, 3, 5, 1]
    assert nonfinite.tolist() == [2, 0, 0, 0]
    assert mins[1:].tolist() == [0.0, -2.5, 3.0] and maxs[1:].tolist() == [1.0, 1.5, 4.0]
    assert means[1:].tolist() == [0.5, -0.5, 3.5]
    assert len(set(checksum.tolist())) == 4


@pytest.mark.parametrize("case", ["scale-exp", "softmax"])
def test_values_has_one_row_per_op_with_an_output(copy_of, case: str) -> None:
    path = copy_of(case)
    replay(path, in_process=True)
    values = pl.from_arrow(read_table(path / "replay" / "values.parquet", "kernbench-values"))
    ops = pl.read_parquet(path / "ops.parquet")
    with_output = ops.filter(pl.col("output").is_not_null())["op_id"].to_list()
    assert values["op_id"].to_list() == sorted(with_output)
    assert values["nonfinite"].sum() == 0


def test_replaying_twice_gives_the_same_values(copy_of) -> None:
    path = copy_of("gemm")
    replay(path, in_process=True)
    first = pl.read_parquet(path / "replay" / "values.parquet")
    replay(path, in_process=True)
    assert pl.read_parquet(path / "replay" / "values.parquet").equals(first)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.bool_])
@pytest.mark.parametrize("size", [1, 6, 64, 4096, 3000])
def test_one_size_batches_give_the_per_segment_statistics(dtype, size: int) -> None:
    """The matrix path (one size) agrees with the segment definition: checksums exactly,
    min/max exactly, means to float rounding."""
    rng = np.random.default_rng(size)
    arrays = [(rng.standard_normal(size) * 100).astype(dtype) for _ in range(5)]
    _, checksum, mins, maxs, means, nonfinite = reduce_batch(list(range(5)), arrays, _Powers())
    assert checksum.tolist() == [one(a) for a in arrays]
    wide = [a.astype(np.float64) for a in arrays]
    assert mins.tolist() == [w.min() for w in wide]
    assert maxs.tolist() == [w.max() for w in wide]
    np.testing.assert_allclose(means, [w.mean() for w in wide], rtol=1e-6, atol=1e-9)
    assert nonfinite.tolist() == [0] * 5


def test_non_finite_values_are_counted_in_one_size_batches() -> None:
    arrays = [np.ones(4096, np.float32) for _ in range(3)]
    arrays[1][[5, 9, 4000]] = [np.inf, np.nan, -np.inf]
    *_, nonfinite = reduce_batch([0, 1, 2], arrays, _Powers())
    assert nonfinite.tolist() == [0, 3, 0]
