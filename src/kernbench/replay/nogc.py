"""The cyclic garbage collector paused while replay decodes and runs a window.

Decoding and running a window allocate tens of thousands of small objects (operands,
bound steps, tuples, written values) and free them by reference counting; none of them
forms a cycle the collector is needed for. Each allocation burst still triggers
collections, and a full one walks every object of the process (numpy, pyarrow and polars
keep hundreds of thousands alive): about an eighth of a small-ops replay. Pausing it for the
window and restoring the caller's setting after changes no result. ``pipeline.run`` keeps
it paused for the whole run (ADR-0712), so what outlives a window is not walked at its end.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Collection paused inside; the previous setting (on or off) restored after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
