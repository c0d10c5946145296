"""Progress of a long replay on a terminal: ops done / total, rate, ETA. Silent otherwise.

The replay usually runs in a child process whose stderr is a pipe; the parent passes
``--progress`` when its own stderr is a terminal (or ``KERNBENCH_PROGRESS=tty`` is set), and
the child then writes to the controlling terminal directly.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO

ENV = "KERNBENCH_PROGRESS"
EVERY_S = 0.5


def _terminal(asked: bool = False) -> IO[str] | None:
    if sys.stderr is not None and sys.stderr.isatty():
        return sys.stderr
    if asked or os.environ.get(ENV) == "tty":
        try:
            return open("/dev/tty", "w")  # noqa: SIM115 - closed by Progress.close
        except OSError:
            return None
    return None


def eta_text(done: int, total: int, elapsed: float) -> str:
    """``"done/total ops (pct%), rate ops/s, ETA m:ss"``."""
    rate = done / elapsed if elapsed > 0 else 0.0
    left = (total - done) / rate if rate > 0 else 0.0
    pct = 100.0 * done / total if total else 100.0
    return (f"{done}/{total} ops ({pct:.0f}%), {rate:,.0f} ops/s, "
            f"ETA {int(left) // 60}:{int(left) % 60:02d}")


class Progress:
    """``update(done)`` redraws one status line at most every ``EVERY_S`` seconds."""

    def __init__(self, total: int, label: str = "replay", stream: IO[str] | None = None,
                 enabled: bool | None = None) -> None:
        self.total, self.label = total, label
        self._owned = stream is None  # a stream this object opened (and closes)
        if stream is None and enabled is not False:
            stream = _terminal(asked=enabled is True)
        self.stream = stream
        self.t0 = self._last = time.monotonic()
        self._shown = False

    def update(self, done: int) -> None:
        if self.stream is None:
            return
        now = time.monotonic()
        if now - self._last < EVERY_S and done < self.total:
            return
        self._last = now
        self.stream.write(f"\r{self.label}: {eta_text(done, self.total, now - self.t0)}\x1b[K")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self.stream is None:
            return
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        if self._owned and self.stream is not sys.stderr:
            self.stream.close()
        self.stream = None
