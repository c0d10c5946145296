"""Warm replay workers: ``ReplayPool`` replays trace after trace without a process start each.

A worker is the same isolated replay child as ``kb.replay`` starts (``python -I``, the package
directory as cwd, kernbench's root and this process's absolute sys.path entries but not the
cwd or the trace directory, dying with this process; ADR-0101), started with ``--serve``: it
takes one trace at a time over a pipe and keeps numpy, pyarrow, the validator and a ``--case``
module imported between traces (ADR-0570). A verdict is still the product: each request has
a fresh run id, the worker writes it into ``verdict.json``, and only a verdict of that run id
is reported. A worker that dies under a trace is that trace's one-line ``ReplayError`` (the
next trace gets a fresh worker); a worker is also replaced after ``max_traces`` traces, when
its sys.path would include the next trace's directory, or when the next trace's ``--case``
module comes from other directories than the one it imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kernbench.errors import BadInputError
from kernbench.replay.child import BOOT, PACKAGE_DIR, case_spec, extra_sys_path, interpret
from kernbench.replay.result import ReplayResult, new_run_id

if TYPE_CHECKING:
    from kernbench.case import Case

__all__ = ["ReplayPool"]
#: traces a worker replays before it is replaced (bounds what one process accumulates)
MAX_TRACES = 64
#: the last bytes of a dead worker's stderr kept for its one line
_TAIL = 4096


class _Worker:
    """One ``--serve`` child and what it was started for."""

    def __init__(self, extras: list[str]) -> None:
        self.extras = extras
        #: the ``--case`` module directories this worker imported from (None: none yet)
        self.case_paths: tuple[str, ...] | None = None
        self.done = 0
        self.stderr: IO[bytes] = tempfile.TemporaryFile(prefix="kernbench-worker-")
        cmd = [sys.executable, "-I", "-c", BOOT, str(PACKAGE_DIR.parent), json.dumps(extras),
               "--serve", "--parent-pid", str(os.getpid())]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, cwd=PACKAGE_DIR, text=True,
                                     encoding="utf-8", errors="replace")

    def fits(self, extras: list[str], case_paths: tuple[str, ...]) -> bool:
        return (self.proc.poll() is None and extras == self.extras
                and (not case_paths or self.case_paths in (None, case_paths)))

    def _tail(self) -> str:
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - _TAIL))
        return self.stderr.read().decode("utf-8", "replace")

    def run(self, request: dict[str, Any]) -> tuple[int, str, bool]:
        """(exit code, the child's last stderr line, whether the worker is still usable)."""
        if request.get("case_paths"):
            self.case_paths = tuple(request["case_paths"])
        self.stderr.seek(0)
        self.stderr.truncate()  # the worker shares this offset: its next line starts at 0
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        except BaseException:  # interrupted mid-trace: this worker's state is unknown
            self.kill()
            raise
        try:
            reply = json.loads(line) if line else None
        except ValueError:
            reply = None
        if not line:  # it died under this trace: its exit code and last stderr line
            return self.proc.wait(), self._tail(), False
        if not isinstance(reply, dict) or reply.get("run_id") != request["run_id"]:
            self.kill()  # a reply that is not this run's: never trust this worker again
            return 3, "kernbench replay: crash: the worker replied out of turn", False
        self.done += 1
        code = int(reply.get("code", 3))
        return code, str(reply.get("line") or ""), code in (0, 1, 2)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self, timeout: float = 2.0) -> None:
        """End the worker: it leaves its loop when stdin closes (one that never had a trace,
        still importing perhaps, is simply killed: it holds nothing)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            if self.done:
                self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()
        for stream in (self.proc.stdout, self.stderr):
            if stream is not None:
                stream.close()


def _close_all(workers: list[_Worker]) -> None:
    while workers:
        workers.pop().close()


class ReplayPool:
    """Up to ``workers`` warm replay children, each replaying one trace at a time.

    ``pool.replay(path, case=None)`` is ``kb.replay(path, case, pool=pool)``. Use it as a
    context manager (or call ``close()``); the workers also end with this process.
    ``max_traces``: traces a worker replays before it is replaced."""

    def __init__(self, workers: int = 1, max_traces: int = MAX_TRACES) -> None:
        if workers < 1 or max_traces < 1:
            raise BadInputError(f"ReplayPool needs workers >= 1 and max_traces >= 1, got "
                                f"workers={workers!r}, max_traces={max_traces!r}")
        self.workers, self.max_traces = workers, max_traces
        self._idle: list[_Worker] = []
        self._busy = 0
        self._cond = threading.Condition()
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_all, self._idle)
        #: processes started so far (a measure of reuse)
        self.started = 0

    def __enter__(self) -> ReplayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the idle workers; a busy one ends when its trace is done."""
        with self._cond:
            self._closed = True
            _close_all(self._idle)
            self._cond.notify_all()

    def start(self, near: str | Path) -> None:
        """Start a worker now, for traces that will be written under ``near`` (it imports
        what a replay needs while this process goes on, e.g. records the first trace)."""
        extras = extra_sys_path(Path(near))
        with self._cond:
            if self._closed or self._busy + len(self._idle) >= self.workers:
                return
            self.started += 1
            self._idle.append(_Worker(extras))

    def worker_pids(self) -> list[int]:
        """Process ids of the idle workers (for measurements)."""
        with self._cond:
            return [w.proc.pid for w in self._idle]

    def replay(self, path: str | Path, case: str | Case | Callable[..., Any] | None = None,
               threads: int | None = None, progress: bool | None = None,
               outputs: bool = True) -> ReplayResult:
        """Replay ``path`` on a warm worker (``kb.replay``'s arguments and result; a factory
        that cannot be imported by name from another process is refused)."""
        named = case_spec(case)
        if named is None:
            what = (f"case {case!r}" if callable(case) else  # else a kb.Case
                    f"the kb.Case {getattr(case, 'name', '?')!r} (built by no factory "
                    "importable by name)")
            raise BadInputError(f"{what} cannot be imported by name from a replay "
                                "worker (a lambda, a local function or one in __main__); "
                                "pass 'module:function' or use kb.replay(..., in_process=True)")
        return self.run(path, *named, threads=threads, progress=progress, outputs=outputs)

    def run(self, path: str | Path, spec: str | None = None, case_paths: Sequence[str] = (),
            threads: int | None = None, progress: bool | None = None,
            outputs: bool = True) -> ReplayResult:
        """Replay ``path`` (a case given as ``module:function`` found in ``case_paths``);
        its own verdict or an error, never an older verdict."""
        path = Path(path)
        extras = extra_sys_path(path)
        paths = tuple(case_paths) if spec is not None else ()
        run_id = new_run_id()
        request = {"path": os.path.abspath(path), "run_id": run_id, "case": spec,
                   "case_paths": list(paths), "threads": threads,
                   "progress": progress if progress is not None else sys.stderr.isatty()}
        worker = self._take(extras, paths)
        usable = False
        try:
            code, line, usable = worker.run(request)
        finally:
            self._give_back(worker, usable)
        return interpret(path, run_id, code, line, outputs)

    def _take(self, extras: list[str], case_paths: tuple[str, ...]) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise BadInputError("this ReplayPool is closed")
                for w in [w for w in self._idle if w.proc.poll() is not None]:
                    self._idle.remove(w)  # ended while idle (its starting thread ended)
                    w.close()
                for i, w in enumerate(self._idle):
                    if w.fits(extras, case_paths):
                        self._busy += 1
                        return self._idle.pop(i)
                if self._idle and self._busy + len(self._idle) >= self.workers:
                    self._idle.pop(0).close()  # no idle worker fits: replace one
                if self._busy + len(self._idle) < self.workers:
                    self._busy += 1
                    self.started += 1
                    break
                self._cond.wait()
        try:
            return _Worker(extras)
        except BaseException:
            with self._cond:
                self._busy -= 1
                self._cond.notify()
            raise

    def _give_back(self, worker: _Worker, usable: bool) -> None:
        with self._cond:
            self._busy -= 1
            keep = usable and not self._closed and worker.done < self.max_traces
            if keep:
                self._idle.append(worker)
            self._cond.notify()
        if not keep:
            worker.close()
