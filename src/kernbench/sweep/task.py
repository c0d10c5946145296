"""One point, run by a worker (a pool process or a Ray task): record, then the stages the spec
asks for, then ``point.json`` (the point's row) inside the trace directory.

A task is a plain function of plain data. It returns its row and, when it has no shared
filesystem with the driver (``dest`` None), the bytes of its trace files for the driver to
write. A point whose kernel (or any stage) raises is a ``failed`` row, never an exception.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from kernbench.sweep.kinds import KERNEL, KINDS, WORKLOAD, resolve_factory
from kernbench.sweep.workload_point import run_workload_point

POINT_FILE = "point.json"
POINT_FORMAT = "kernbench-sweep-point"
#: environment of every worker: one BLAS (and polars) thread each
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "VECLIB_MAXIMUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1",
              "POLARS_MAX_THREADS": "1", "PYTHONHASHSEED": "0"}


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


#: this worker process's warm replay worker (replay=true), started by its first replay
_POOL: list[Any] = []


def _replay_pool() -> Any:
    """The ``kb.ReplayPool`` of this sweep worker: every point it replays is replayed in an
    isolated child without a process start each (it ends with this process)."""
    if not _POOL:
        from kernbench.replay.pool import ReplayPool

        _POOL.append(ReplayPool())
    return _POOL[0]


def _rules(task: dict[str, Any]) -> Any:
    """The sweep's check rules (``rules.toml``'s text, shipped with the task), or None."""
    if task.get("rules_text") is None:
        return None
    import tomllib

    from kernbench.analyze.thresholds import parse_rules

    return parse_rules(tomllib.loads(task["rules_text"]), "sweep rules.toml")


def _stages(trace: Any, task: dict[str, Any], row: dict[str, Any]) -> None:
    """Metrics, then replay and check when asked; fills ``row``."""
    from kernbench.analyze import check, metrics

    row["metrics"] = metrics(trace)
    if task["replay"]:
        from kernbench.replay import replay

        t0 = time.perf_counter()
        case = task["case"] if ":" in task["case"] else None
        result = replay(trace.path, case=case, pool=_replay_pool())
        row["replay_wall_s"] = time.perf_counter() - t0
        # no output wrong and no failure (a case without a reference is not a wrong point)
        row["replay_ok"] = result.status in ("verified", "unverified")
        row["replay_max_abs_err"] = max(result.max_abs_err.values(), default=None)
    if task["check"]:
        report = check(trace, rules=_rules(task))
        row["check_ok"] = report.ok
        row["check_violations"] = ", ".join(report.violated()) or None


def _record(task: dict[str, Any], out: Path, row: dict[str, Any]) -> Any:
    from kernbench.kernels.registry import build_case
    from kernbench.record.recorder import record
    from kernbench.trace.hw import HwConfig

    factory = resolve_factory(task["case"])
    case = build_case(task["case"], task["params"], factory=factory)
    t0 = time.perf_counter()
    trace = record(case, out, hw=HwConfig(**task["hw"]))
    row["record_wall_s"] = time.perf_counter() - t0
    return trace


def _retime(task: dict[str, Any], source: Path, out: Path, row: dict[str, Any]) -> Any:
    """The point's trace retimed from its kernel's recorded point, or recorded
    when the op stream depends on this point's hardware (``RetimeError``)."""
    from kernbench.errors import RetimeError
    from kernbench.record.retime import retime
    from kernbench.trace.hw import HwConfig

    t0 = time.perf_counter()
    try:
        trace = retime(source, HwConfig(**task["hw"]), out, origin=task["source_name"])
    except RetimeError:
        return _record(task, out, row)
    row["record_wall_s"] = time.perf_counter() - t0
    row["retimed_from"] = task["source_id"]
    return trace


def _kernel_point(task: dict[str, Any], out: Path, row: dict[str, Any],
                  source: Path | None) -> None:
    """A kernel point: recorded (or retimed from ``source``), then its stages."""
    trace = _retime(task, source, out, row) if source else _record(task, out, row)
    _stages(trace, task, row)


#: kind of case -> the runner that makes a point's folder and fills its row
RUNNERS: dict[str, Callable[[dict[str, Any], Path, dict[str, Any], Path | None], None]] = {
    KERNEL: _kernel_point,
    WORKLOAD: partial(run_workload_point, pool=_replay_pool, rules=_rules),
}


def _source(task: dict[str, Any], tmp: Path) -> Path | None:
    """The folder of the point this one is retimed from: the driver's, or (no shared
    filesystem) its files written under ``tmp``."""
    if not task.get("source"):
        return None
    if not task.get("source_files"):
        return Path(task["source"])
    source = tmp / f"source{KINDS[task.get('kind', KERNEL)].suffix}"
    for rel, data in task["source_files"].items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_bytes(data)
    return source


def shipped(task: dict[str, Any]) -> dict[str, Any]:
    """``task`` for a worker without the driver's filesystem: a retimed point carries the
    files of the point it is retimed from (a trace, or a workload run's folder)."""
    if task.get("source") is None:
        return task
    root = Path(task["source"])
    return {**task, "source_files": {k: v for k, v in read_files(root).items()
                                     if k != POINT_FILE}}


def _finish(folder: Path, task: dict[str, Any], row: dict[str, Any]) -> None:
    from kernbench.trace import file_sha256

    kind = KINDS[task.get("kind", KERNEL)]
    body = {"format": POINT_FORMAT, "point_id": task["point_id"],
            kind.seal_key: file_sha256(folder / kind.seal), "row": row}
    (folder / POINT_FILE).write_text(json.dumps(body, indent=1) + "\n")  # row in order


def read_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by its relative POSIX path."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Run one point. ``task``: point_id, kind (``kernel`` when absent; ``RUNNERS``), case,
    params, hw (full dict), replay, check, rules_text, dest (a staging folder on the
    driver's filesystem, or None); for a point retimed from another (the same kernel or
    workload recorded on other hardware): source (that point's folder), source_id,
    source_name and, without a shared filesystem, source_files.

    Returns ``{"row": ..., "files": {relpath: bytes} | None, "staged": path | None}``.
    """
    started = time.perf_counter()
    row: dict[str, Any] = {"status": "ok", "error": None, "metrics": None, "replay_ok": None,
                           "replay_max_abs_err": None, "check_ok": None,
                           "check_violations": None, "retimed_from": None,
                           "record_wall_s": None, "replay_wall_s": None}
    dest = task.get("dest")
    kind = task.get("kind", KERNEL)
    stage = Path(dest) if dest else Path(tempfile.mkdtemp(prefix="kb-point-"))
    trace_dir = stage / f"{task['point_id']}.{os.getpid()}{KINDS[kind].suffix}"
    result: dict[str, Any] = {"row": row, "files": None, "staged": None}
    try:
        with tempfile.TemporaryDirectory(prefix="kb-source-") as tmp:
            RUNNERS[kind](task, trace_dir, row, _source(task, Path(tmp)))
    except Exception as exc:  # noqa: BLE001 - a point's failure is data, not the sweep's end
        row.update(status="failed", error=one_line(exc), metrics=None, retimed_from=None)
    row["wall_s"] = time.perf_counter() - started
    try:
        if row["status"] == "ok":
            _finish(trace_dir, task, row)
            if dest:
                result["staged"] = str(trace_dir)
            else:
                result["files"] = read_files(trace_dir)
        elif trace_dir.exists():
            shutil.rmtree(trace_dir, ignore_errors=True)
    finally:
        if not dest:
            shutil.rmtree(stage, ignore_errors=True)
    return result
