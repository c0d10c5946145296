"""Numbers out of polars reductions (``kernbench.trace.scalars``): the typed ``int(x or 0)``."""

from __future__ import annotations

import datetime
import re

import polars as pl
import pytest

from kernbench.trace.scalars import as_float, as_int


def test_reductions_of_numeric_columns_are_their_numbers_and_empty_ones_the_default() -> None:
    s = pl.Series([3, 9, 4], dtype=pl.Int64)
    assert (as_int(s.max()), as_int(s.min()), as_float(s.mean())) == (9, 3, pytest.approx(16 / 3))
    empty = pl.Series([], dtype=pl.Int64)
    assert (as_int(empty.max()), as_int(empty.max(), -1), as_float(empty.mean())) == (0, -1, 0.0)
    assert as_int(pl.Series([2.75]).max()) == 2 and as_float(pl.Series([7]).max()) == 7.0


@pytest.mark.parametrize("value", ["12", datetime.date(2026, 1, 1), [1]])
def test_a_reduction_that_is_not_a_number_is_refused_naming_it(value: object) -> None:
    with pytest.raises(TypeError, match="numeric column, got " + re.escape(repr(value))):
        as_int(value)
    with pytest.raises(TypeError, match="numeric column"):
        as_float(value)
