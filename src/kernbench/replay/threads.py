"""The replay process's BLAS thread count: one by default (many small GEMMs on a busy
machine run far slower with a thread pool), ``--threads N`` or
``KERNBENCH_REPLAY_THREADS`` to change it. Applied with threadpoolctl for the whole
replay, reference included."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from threadpoolctl import threadpool_limits

from kernbench.errors import BadInputError

ENV = "KERNBENCH_REPLAY_THREADS"


def thread_count(threads: int | None = None) -> int:
    """``threads``, else the environment's, else 1; BadInputError unless a positive int."""
    value: object = threads if threads is not None else os.environ.get(ENV, "1")
    try:
        n = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise BadInputError(f"replay threads must be a positive integer, got {value!r}")
    return n


@contextlib.contextmanager
def blas_threads(threads: int | None = None) -> Iterator[int]:
    """Limit the BLAS pools to ``thread_count(threads)`` threads inside."""
    n = thread_count(threads)
    with threadpool_limits(limits=n, user_api="blas"):
        yield n
