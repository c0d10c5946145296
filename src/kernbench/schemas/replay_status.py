"""What a replay's verdict says happened: its ``status`` (ADR-0830).

``verdict.json`` (written by replay) carries it as ``status``; ``ReplayResult.status``,
``summary``, the notebook table, ``kernbench report`` and the pytest plugin read it through
``verdict_status``, which derives it from the verdict's fields (so a verdict written before
``status`` existed reads the same). Pure Python: the process that only starts a replay child
imports it without numpy or pyarrow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FAILED", "STATUSES", "UNVERIFIED", "VERIFIED", "WRONG", "verdict_status"]

#: what a replay found (``ReplayResult.status``, ``verdict.json``'s ``status``; ADR-0830)
VERIFIED, UNVERIFIED, WRONG, FAILED = "verified", "unverified", "wrong", "failed"
STATUSES = (VERIFIED, UNVERIFIED, WRONG, FAILED)


def verdict_status(verdict: Mapping[str, Any]) -> str:
    """What a verdict says happened. ``failed``: an invalid read, or the reference could not
    be compared (``error``); ``wrong``: an output was compared and did not match;
    ``verified``: a reference ran and compared every output, and each matched;
    ``unverified``: a clean replay that did not compare every output (no reference, or one
    that returned none or only some of them)."""
    if verdict.get("invalid_read") or verdict.get("error"):
        return FAILED
    outputs = verdict.get("outputs") or {}
    if any(not o.get("ok") for o in outputs.values()):
        return WRONG
    if verdict.get("reference") is None or not outputs or not all(
            o.get("checked") for o in outputs.values()):
        return UNVERIFIED
    return VERIFIED
