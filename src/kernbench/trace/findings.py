"""What the trace validator found: per rule, an exact count and the first findings kept.

Every row rule (``rows.py``, ``attrs.py``, ``element_checks.py``) adds to one ``Findings``;
``validate.py`` turns it into the validator's answer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: one finding: (rule, op_id, other_op_id, message)
Finding = tuple[str, int | None, int | None, str]


class Findings:
    """Exact counts per rule and the first ``keep`` findings of each."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.counts: dict[str, int] = {}
        self.rows: list[Finding] = []

    def add(self, rule: str, rows: np.ndarray, message: Callable[[int], str | None]) -> None:
        """``len(rows)`` findings of ``rule`` at op rows ``rows``; ``message(k)`` is the
        k-th's text (None: a null value; ``op ROW breaks the RULE rule`` then)."""
        if not len(rows):
            return
        for k in range(self._room(rule, len(rows))):
            row = int(rows[k])
            text = message(k)
            self.rows.append((rule, row, None, text if text is not None
                              else f"op {row} breaks the {rule} rule"))

    def one(self, rule: str, message: str, op_id: int | None = None, n: int = 1) -> None:
        for _ in range(self._room(rule, n)):
            self.rows.append((rule, op_id, None, message))

    def _room(self, rule: str, n: int) -> int:
        """Count ``n`` more findings of ``rule``; how many of them are kept."""
        have = self.counts.get(rule, 0)
        self.counts[rule] = have + n
        return min(self.keep - min(have, self.keep), n)
