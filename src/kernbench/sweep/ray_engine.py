"""The Ray engine (``kernbench sweep --ray [ADDRESS]``; ``pip install 'kernbench[ray]'``).

Each point is one Ray task running the same ``run_point`` as the local pool. Workers need no
shared filesystem: a task returns its trace files' bytes and the driver writes them. Without
an address a local Ray is started (and stopped afterwards); with one, the driver joins that
cluster (``auto``, ``HOST:PORT`` or ``ray://HOST:10001``). A Ray session already open in the
process (``ray.init`` by the caller) is used as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

from kernbench.errors import BadInputError
from kernbench.sweep.local import died, top_up
from kernbench.sweep.task import WORKER_ENV, run_point, shipped

Task = dict[str, Any]


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BadInputError("--ray needs Ray: pip install 'kernbench[ray]'") from None
    return ray


def _local_env() -> dict[str, str]:
    """Env of local Ray workers: one BLAS thread, and this process's import path."""
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    return {**WORKER_ENV, "PYTHONPATH": os.pathsep.join(paths)}


def init_kwargs(address: str | None = None, num_cpus: int | None = None) -> dict[str, Any]:
    """``ray.init`` arguments: quiet, workers with one BLAS thread and a fixed hash seed (and,
    for a local Ray, this process's import path)."""
    env = dict(WORKER_ENV) if address else _local_env()
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "runtime_env": {"env_vars": env}}
    if address:
        kwargs["address"] = address
    elif num_cpus:
        kwargs["num_cpus"] = num_cpus
    return kwargs


class RayEngine:
    """``run(tasks)`` yields ``(task, result)`` as Ray tasks finish."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self.address = address or None
        self.workers = workers

    def _init(self, ray: Any) -> bool:
        """Start or join Ray unless a session is open; whether this engine started it."""
        if ray.is_initialized():
            return False
        try:
            ray.init(**init_kwargs(self.address, self.workers))
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = self.address or "a local Ray"
            raise BadInputError(f"--ray: cannot start or join {where}: "
                                f"{str(exc).strip().splitlines()[0] if str(exc) else exc}"
                                ) from None
        return True

    def run(self, tasks: Iterator[Task | None]) -> Iterator[tuple[Task, dict[str, Any]]]:
        ray = import_ray()
        started = self._init(ray)
        try:
            remote = ray.remote(num_cpus=1, max_retries=1)(run_point)
            cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
            limit = 2 * cpus
            pending: dict[Any, Task] = {}
            while True:
                top_up(pending, tasks, limit,
                       lambda task: remote.remote({**shipped(task), "dest": None}))
                if not pending:
                    return
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    task = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        result = died(exc)
                    yield task, result
        finally:
            if started:
                ray.shutdown()
