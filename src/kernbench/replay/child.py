"""Start the replay child isolated, and believe only the verdict of the run it started.

The child is ``python -I`` (no cwd or script dir on sys.path, no PYTHON* variables, no user
site) with the package directory as cwd; every path it needs is passed explicitly (ADR-0101):
kernbench's own import root first, then, appended after the interpreter's own entries, this
process's absolute sys.path entries except its cwd and the trace directory, and the location
of a ``--case`` module as resolved here. Each run has a fresh run id that the child writes into
``verdict.json``; a verdict with another run id is never reported (ADR-0100). If this process
dies, the child dies too (PR_SET_PDEATHSIG on Linux, a parent-pid watch elsewhere).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernbench import errors
from kernbench.errors import KernbenchError, ReplayError
from kernbench.replay.result import (
    OUT_OF_MEMORY,
    ReplayResult,
    abs_errors,
    load_verdict,
    new_run_id,
)

#: errors a child may report on its one stderr line, by class name (no eval, a fixed table)
_ERRORS: dict[str, type[KernbenchError]] = {
    name: cls for name, cls in vars(errors).items()
    if isinstance(cls, type) and issubclass(cls, KernbenchError)
}
_LINE = re.compile(r"^kernbench replay: (\w+): (.*)$")
#: a line saying that memory was refused (Python, numpy, Arrow, C++, Rust, the C library)
_MEMORY = re.compile(r"MemoryError|out of memory|bad_alloc|Cannot allocate memory|"
                     r"Unable to allocate|memory allocation (of \d+ bytes )?failed", re.IGNORECASE)
_MEMORY_HINT = ("give the replay more memory, or lower KERNBENCH_MAX_MEMORY_GB below it so "
                "such a trace is refused up front")
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # .../kernbench
#: run in ``python -I -c BOOT ROOT EXTRA ...``: kernbench's root first, the JSON list EXTRA
#: appended (both before anything is imported); the replay machinery imported and frozen
#: (ADR-0680: the collector never walks it again; a failed import is left to ``main`` to
#: report), then hand over to the child's main
BOOT = ("import gc, json, sys\n"
        "r = sys.argv.pop(1); extra = json.loads(sys.argv.pop(1))\n"
        "r in sys.path or sys.path.insert(0, r)\n"
        "sys.path.extend(p for p in extra if p not in sys.path)\n"
        "try:\n"
        "    import kernbench.replay.session, kernbench.trace.validate\n"
        "except Exception:\n"
        "    pass\n"
        "gc.freeze()\n"
        "from kernbench.replay.__main__ import main\n"
        "sys.exit(main())\n")


def extra_sys_path(trace: Path) -> list[str]:
    """This process's sys.path entries the child may append: absolute existing directories,
    not the current directory and not the trace directory or anything inside it."""
    cwd = os.path.realpath(os.getcwd())
    tdir = os.path.realpath(trace)
    out: list[str] = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if real in (cwd, tdir) or real.startswith(tdir + os.sep) or entry in out:
            continue
        out.append(entry)
    return out


def case_spec(case: str | Callable[..., Any] | None) -> tuple[str | None, Sequence[str]] | None:
    """How a child is told the case: ``(spec, where its module is)`` (``(None, ())`` for no
    case), or None when the factory cannot be imported by name from another process (a
    lambda, a local function, one defined in ``__main__``: it is replayed in this process)."""
    if case is None:
        return None, ()
    if isinstance(case, str):
        spec: str | None = case
    else:
        from kernbench.case.factory import factory_spec

        spec = factory_spec(case)
    if spec is None:
        return None
    from kernbench.case.factory import locate

    return spec, locate(spec)


def child_command(path: Path, run_id: str, spec: str | None = None,
                  case_paths: Sequence[str] = (), threads: int | None = None,
                  progress: bool | None = None) -> list[str]:
    cmd = [sys.executable, "-I", "-c", BOOT, str(PACKAGE_DIR.parent),
           json.dumps(extra_sys_path(path)), os.path.abspath(path),
           "--run-id", run_id, "--parent-pid", str(os.getpid())]
    if spec is not None:
        cmd += ["--case", spec]
        for entry in case_paths:
            cmd += ["--case-path", entry]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    if progress if progress is not None else sys.stderr.isatty():
        cmd += ["--progress"]  # the child's stderr is a pipe: it writes to the terminal
    return cmd


def run_child(path: str | Path, spec: str | None = None, case_paths: Sequence[str] = (),
              threads: int | None = None, progress: bool | None = None,
              outputs: bool = True) -> ReplayResult:
    """Replay ``path`` in an isolated child; its own verdict, or an error — never an old one.
    ``outputs`` False: the result holds the verdict only (no output arrays are read)."""
    path = Path(path)
    run_id = new_run_id()
    proc = subprocess.Popen(child_command(path, run_id, spec, case_paths, threads, progress),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace",
                            cwd=PACKAGE_DIR)
    before = _children_peak_rss()
    try:
        _, stderr = proc.communicate()
    finally:  # interrupted here (Ctrl-C, an exception): do not leave the child running on
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    after = _children_peak_rss()
    return interpret(path, run_id, proc.returncode, stderr, outputs,
                     peak_rss=after if after is not None and before is not None
                     and after > before else None)


def _children_peak_rss() -> int | None:
    """The largest peak RSS (bytes) of this process's waited-for children, where known: it
    grows past its value before a child started only by that child's own peak."""
    try:
        import resource

        kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    except (ImportError, OSError, ValueError):
        return None
    return kib * (1 if sys.platform == "darwin" else 1024)


def _result(path: Path, run_id: str, outputs: bool) -> ReplayResult:
    if outputs:
        from kernbench.replay.session import load_result

        return load_result(path, run_id)
    verdict = load_verdict(path, run_id)
    return ReplayResult({}, abs_errors(verdict), verdict, path)


def interpret(path: Path, run_id: str, returncode: int, stderr: str, outputs: bool = True,
              peak_rss: int | None = None) -> ReplayResult:
    """The child's result: 0/1 with a verdict of ``run_id``; 2 its bad-input error; any
    other end (a signal, a crash, exit 0/1 without this run's verdict) a ReplayError, which
    says so when memory was refused (its last line) or the child was SIGKILLed (how an
    out-of-memory killer ends a process; ``peak_rss`` its peak, when known)."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = lines[-1][:500] if lines else ""
    if returncode in (0, 1):
        try:
            return _result(path, run_id, outputs)
        except ReplayError as exc:
            raise ReplayError(f"{exc} (exit {returncode}{': ' + last if last else ''})"
                              ) from None
    m = _LINE.match(last)
    if returncode == 2 and m and m.group(1) in _ERRORS:
        raise _ERRORS[m.group(1)](m.group(2))
    said = next((ln for ln in reversed(lines[-10:]) if _MEMORY.search(ln)), None)
    if said is not None:  # the line itself, or a native library's abort a few lines up
        told = said[:500].removeprefix(f"kernbench replay: {OUT_OF_MEMORY}: ")
        raise ReplayError(f"the replay ran out of memory: an allocation was refused ({told}); "
                          f"no verdict of this run; {_MEMORY_HINT}")
    if returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"crashed (exit {returncode})"
    detail = f": {last}" if last else ""
    killed = ""
    if returncode == -signal.SIGKILL:
        peak = f", its peak RSS {peak_rss / 2**30:.3g} GiB" if peak_rss else ""
        killed = (f" (out of memory? the kernel's OOM killer and container memory limits end "
                  f"a process with SIGKILL{peak}; {_MEMORY_HINT})")
    raise ReplayError(f"the replay process {how}{detail}; no verdict of this run{killed}")
