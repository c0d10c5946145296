"""Python numbers out of polars reductions, typed.

``Series.max()``, ``.min()`` and ``.mean()`` are typed as any Python literal a column may hold
(a date, a string, a list ...) or None for an empty column. The columns kernbench reduces are
numeric, so these turn the result into the ``int`` or ``float`` it is, ``default`` for an
empty column, and raise ``TypeError`` (naming the value) for anything else.
"""

from __future__ import annotations

__all__ = ["as_float", "as_int"]


def _number(value: object) -> int | float | None:
    """``value`` when it is a number or None (no rows); ``TypeError`` naming it otherwise."""
    if value is None or isinstance(value, int | float):
        return value
    raise TypeError(f"expected the reduction of a numeric column, got {value!r}")


def as_int(value: object, default: int = 0) -> int:
    """A numeric column's reduction as an int; ``default`` when it is None (no rows)."""
    number = _number(value)
    return default if number is None else int(number)


def as_float(value: object, default: float = 0.0) -> float:
    """A numeric column's reduction as a float; ``default`` when it is None (no rows)."""
    number = _number(value)
    return default if number is None else float(number)
