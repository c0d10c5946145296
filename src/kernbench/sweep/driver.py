"""``kernbench sweep``: run every point of a spec on an engine, resuming what is finished.

The driver owns the sweep directory: it skips points whose traces verify, hands the rest to
the engine a few at a time, moves finished traces into place, and rewrites
``points.parquet`` atomically as points finish (at most every ``refresh_s`` seconds, and at
the end, also when interrupted). A SIGKILL loses at most the points in flight.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.sweep.kinds import case_kind
from kernbench.sweep.local import LocalEngine
from kernbench.sweep.points import Point, expand, validate
from kernbench.sweep.spec import SweepSpec
from kernbench.sweep.store import (
    POINTS_DIR,
    finished_row,
    open_sweep,
    place,
    trace_dir,
    write_files,
)
from kernbench.sweep.table import flat_row, frame, normalise, write_points


@dataclass(frozen=True)
class Progress:
    """What a progress callback sees after each point."""

    done: int
    total: int
    failed: int
    resumed: int
    eta_s: float | None

    def to_text(self) -> str:
        eta = "-" if self.eta_s is None else time.strftime("%H:%M:%S", time.gmtime(self.eta_s))
        return (f"sweep: {self.done}/{self.total} points, {self.failed} failed, "
                f"{self.resumed} resumed, ETA {eta}")


@dataclass(frozen=True)
class SweepSummary:
    path: str
    total: int
    ok: int
    failed: int
    resumed: int
    wrong: int  # replayed with a wrong result
    check_failed: int
    engine: str
    wall_s: float
    retimed: int = 0  # points retimed from their kernel's recorded point (ADR-0901)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.wrong or self.check_failed else 0

    def to_text(self) -> str:
        extra = "".join(f", {n} {what}" for n, what in ((self.retimed, "retimed"),
                                                         (self.wrong, "replayed wrong"),
                                                         (self.check_failed, "failed check"))
                        if n)
        return (f"sweep {self.path}: {self.total} points ({self.ok} ok, {self.failed} failed, "
                f"{self.resumed} resumed{extra}) on {self.engine} in {self.wall_s:.1f} s "
                f"-> {Path(self.path) / 'points.parquet'}\n")

    def to_json(self) -> str:
        import json

        return json.dumps(self.__dict__ | {"exit_code": self.exit_code}, indent=2)


def _task(spec: SweepSpec, point: Point, stage: Path, root: Path,
          source: Point | None = None) -> dict[str, Any]:
    kind = case_kind(spec.case)
    task = {"point_id": point.point_id, "kind": kind, "case": spec.case,
            "params": dict(point.params),
            "hw": point.hw_dict, "replay": spec.replay, "check": spec.check,
            "rules_text": spec.rules_text, "dest": str(stage), "source": None}
    if source is not None:  # retimed from the point that recorded its kernel (workload)
        where = trace_dir(root, source.point_id, kind)
        task.update(source=str(where), source_id=source.point_id,
                    source_name=f"{POINTS_DIR}/{where.name}")
    return task


def kernel_sources(points: list[Point]) -> dict[int, Point]:
    """Point index -> the point its trace (a workload's traces) is retimed from: the first
    point (in spec order) of the points that differ from it only in hardware; that one
    records."""
    first: dict[tuple[Any, ...], Point] = {}
    out = {}
    for p in points:
        src = first.setdefault(p.params, p)
        if src is not p:
            out[p.index] = src
    return out


def _tasks(spec: SweepSpec, points: list[Point], rows: list[dict[str, Any] | None],
           stage: Path, root: Path, retime: bool = True) -> Iterator[dict[str, Any] | None]:
    """The points still to run: every kernel's recorded point first, then the points
    retimed from it once it has finished (recorded when it failed); ``None`` while the
    points left wait for a recording in flight (the engine collects a result first)."""
    sources = kernel_sources(points) if retime else {}
    waiting = []
    for p in points:
        if rows[p.index] is None:
            if p.index in sources:
                waiting.append(p)
            else:
                yield _task(spec, p, stage, root)
    while waiting:
        later = []
        for p in waiting:
            src = sources[p.index]
            row = rows[src.index]
            if row is None:
                later.append(p)
            else:
                yield _task(spec, p, stage, root, src if row["status"] == "ok" else None)
        waiting = later
        if waiting:
            yield None


def make_engine(workers: int | None = None, ray: str | None = None) -> Any:
    """The process pool, or (``ray`` not None; ``""`` starts a local Ray) the Ray engine."""
    if ray is None:
        return LocalEngine(workers)
    from kernbench.sweep.ray_engine import RayEngine, import_ray

    import_ray()  # fail fast, before anything is written
    return RayEngine(ray or None, workers)


def run_sweep(spec: SweepSpec, out: str | Path, workers: int | None = None,
              ray: str | None = None, engine: Any = None,
              progress: Callable[[Progress], Any] | None = None,
              refresh_s: float = 1.0, retime: bool = True) -> SweepSummary:
    """Run (or resume) ``spec`` into the sweep directory ``out``. ``retime``: points that
    differ only in hardware are retimed from their kernel's recorded point (ADR-0901);
    False records every point (the bench's side by side)."""
    started = time.perf_counter()
    root = Path(out)
    points = list(expand(spec, validate(spec)))
    engine = engine or make_engine(workers, ray)
    rows: list[dict[str, Any] | None] = [None] * len(points)
    counts = {"failed": 0, "resumed": 0, "run": 0}
    last_write = [0.0]

    def refresh(force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - last_write[0] >= refresh_s:
            write_points(root, frame(spec, (r for r in rows if r is not None)))
            last_write[0] = now

    def report() -> None:
        if progress is None:
            return
        done = sum(r is not None for r in rows)
        run = counts["run"]
        eta = (time.perf_counter() - started) / run * (len(points) - done) if run else None
        progress(Progress(done, len(points), counts["failed"], counts["resumed"], eta))

    kind = case_kind(spec.case)
    with open_sweep(root, spec.to_toml(), spec.rules_text) as stage:
        for p in points:
            row = finished_row(root, p.point_id, kind)
            if row is not None:
                rows[p.index] = flat_row(p, spec.case, normalise(row))
                counts["resumed"] += 1
        report()
        try:
            tasks = _tasks(spec, points, rows, stage, root, retime)
            by_id = {p.point_id: p for p in points}
            for task, result in engine.run(tasks):
                point = by_id[task["point_id"]]
                if result.get("staged"):
                    place(Path(result["staged"]), root, point.point_id, kind)
                elif result.get("files"):
                    write_files(result["files"], stage, root, point.point_id, kind)
                row = normalise(result["row"])
                rows[point.index] = flat_row(point, spec.case, row)
                counts["run"] += 1
                counts["failed"] += row["status"] != "ok"
                refresh()
                report()
        finally:
            refresh(force=True)
    done = [r for r in rows if r is not None]
    return SweepSummary(
        str(root), len(points), sum(r["status"] == "ok" for r in done), counts["failed"],
        counts["resumed"], sum(r.get("replay_ok") is False for r in done),
        sum(r.get("check_ok") is False for r in done), engine.name,
        time.perf_counter() - started, sum(r.get("retimed_from") is not None for r in done))
