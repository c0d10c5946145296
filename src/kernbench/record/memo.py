"""A memo of computed values bounded by entries and bytes (the Triton front end's index
plans and index arithmetic): cleared whole when the next entry would pass either bound, so
keys that never repeat cost one clear now and then, never a scan. A dict, so a lookup is a
plain ``dict.get`` on the per-access path."""

from __future__ import annotations

from typing import Any


class BoundedMemo(dict):
    """``keep(key, value, nbytes, limit, max_bytes)``, or ``put(key, value, limit)`` bounded
    by entries alone; ``held``: the bytes kept so far."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0

    def keep(self, key: Any, value: Any, nbytes: int, limit: int, max_bytes: int) -> None:
        if len(self) >= limit or self.held + nbytes > max_bytes:
            self.clear()
            self.held = 0
        self[key] = value
        self.held += nbytes

    def put(self, key: Any, value: Any, limit: int) -> Any:
        """Keep ``value``, bounded by entries alone (cleared at ``limit``); ``value``."""
        if len(self) >= limit:
            self.clear()
        self[key] = value
        return value
