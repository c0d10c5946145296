"""The default engine: a local pool of spawned worker processes, one BLAS thread each.

Workers share the driver's filesystem, so each moves its finished trace into the sweep's
staging folder itself and returns only its row. At most ``2 * workers`` points are in flight,
so the driver's memory does not grow with the number of points. A worker that dies (a
crash, the OOM killer) fails the points that were in flight; the pool is rebuilt and the
sweep goes on.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from kernbench.sweep.task import WORKER_ENV, run_point

Task = dict[str, Any]


def default_workers() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def worker_env() -> Iterator[None]:
    """Set WORKER_ENV in this process's environment while workers are spawned from it."""
    saved = {k: os.environ.get(k) for k in WORKER_ENV}
    os.environ.update(WORKER_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def top_up(pending: dict[Any, Task], tasks: Iterator[Task | None], limit: int,
           submit: Callable[[Task], Any]) -> None:
    """Submit tasks until ``limit`` are in flight or ``tasks`` is exhausted or yields None
    (the tasks left wait for a point in flight: asked again once a result is in). Bounded
    submission keeps the driver's memory flat in the number of points."""
    while len(pending) < limit:
        task = next(tasks, None)
        if task is None:
            return
        pending[submit(task)] = task


def died(exc: BaseException) -> dict[str, Any]:
    """The result of a point whose worker process died under it."""
    return {"row": {"status": "failed", "error": f"worker process died ({type(exc).__name__})",
                    "wall_s": 0.0}, "files": None, "staged": None}


def _submitter(pool: ProcessPoolExecutor) -> Callable[[Task], Future[dict[str, Any]]]:
    """Submission of one point to ``pool``."""
    return lambda task: pool.submit(run_point, task)


class LocalEngine:
    """``run(tasks)`` yields ``(task, result)`` as points finish, on ``workers`` processes."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or default_workers()

    def _pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers,
                                   mp_context=multiprocessing.get_context("spawn"))

    def run(self, tasks: Iterator[Task | None]) -> Iterator[tuple[Task, dict[str, Any]]]:
        limit = 2 * self.workers
        pending: dict[Future[Any], Task] = {}
        with worker_env():
            pool = self._pool()
            try:
                while True:
                    top_up(pending, tasks, limit, _submitter(pool))
                    if not pending:
                        return
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    broken = False
                    for fut in done:
                        task = pending.pop(fut)
                        try:
                            yield task, fut.result()
                        except BrokenProcessPool as exc:
                            broken = True
                            yield task, died(exc)
                    if broken:
                        for task in list(pending.values()):
                            yield task, died(BrokenProcessPool())
                        pending.clear()
                        pool.shutdown(wait=False, cancel_futures=True)
                        pool = self._pool()
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
