"""``python -m kernbench.replay PATH [--case MODULE:FUNC] [--require-reference]``.

This module *is* the replay process, so it always replays here (``--in-process`` is
accepted for symmetry with ``kb.replay``). Exit 0: verified (or, without
``--require-reference``, unverified: not every output compared, no invalid read); 1: outputs
wrong, an invalid read, a reference failure, or unverified under ``--require-reference``
(ADR-0830); 2: bad input (one line
on stderr, no traceback); 3: the replay crashed (one line, no verdict written; a
``MemoryError`` — a memory limit refused an allocation — says ``out of memory``).

``kb.replay`` starts it isolated (see ``kernbench.replay.child``) with a fresh ``--run-id``
that goes into ``verdict.json`` and ``--parent-pid``: the child ends when that process does.
With ``--serve`` it is a warm worker of a ``ReplayPool`` (``kernbench.replay.pool``): one
JSON request a line on stdin (a trace, its run id, the case), one JSON reply a line on the
stdout it started with (anything else printed goes to stderr), one trace at a time, until
stdin closes or a replay crashes.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from kernbench.errors import KernbenchError
from kernbench.replay.result import (
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    EXIT_OK,
    EXIT_WRONG,
    OUT_OF_MEMORY,
    ReplayResult,
    exit_code,
    summary,
)

__all__ = ["EXIT_OK", "EXIT_WRONG", "EXIT_BAD_INPUT", "EXIT_CRASH", "ReplayResult", "exit_code",
           "summary", "main", "die_with_parent"]
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` ends (it started us and waits for our verdict)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(EXIT_CRASH)

    if os.getppid() != parent_pid:  # it died before the death signal was armed
        os._exit(EXIT_CRASH)
    threading.Thread(target=watch, name="kernbench-parent-watch", daemon=True).start()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:1000]


def _address_limit() -> str:
    """`` (RLIMIT_AS N GiB)`` when this process runs under an address-space limit."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return ""
    return "" if soft == resource.RLIM_INFINITY else f" (RLIMIT_AS {soft / 2**30:.3g} GiB)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernbench.replay",
                                     description="Replay a kernbench trace on real numbers.")
    parser.add_argument("path", nargs="?", default=None,
                        help="trace directory (NAME.ktrace); none with --serve")
    parser.add_argument("--case", default=None, metavar="MODULE:FUNC",
                        help="case factory giving the reference (default: the built-in case)")
    parser.add_argument("--require-reference", action="store_true",
                        help="exit 1 unless verified (no reference, or one that compared "
                             "not every output)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="BLAS threads for the replay (default 1)")
    parser.add_argument("--progress", action="store_true",
                        help="show progress on the terminal even when stderr is not one")
    parser.add_argument("--in-process", action="store_true",
                        help="accepted for symmetry with kb.replay; this is the replay process")
    parser.add_argument("--case-path", action="append", default=[], metavar="DIR",
                        help="where the --case module must import from (set by kb.replay)")
    parser.add_argument("--run-id", default=None, help="written into verdict.json")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="end when this process ends (set by kb.replay)")
    parser.add_argument("--serve", action="store_true",
                        help="a pool's warm worker: JSON requests on stdin (set by ReplayPool)")
    args = parser.parse_args(argv)
    if (args.path is None) != args.serve:
        parser.error("give a trace directory, or --serve (and no trace)")
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    if args.serve:
        return serve()
    try:
        from kernbench.replay.session import replay_in_process

        result = replay_in_process(args.path, args.case, run_id=args.run_id,
                                   case_paths=args.case_path, threads=args.threads,
                                   progress=True if args.progress else None)
    except KernbenchError as exc:
        print(f"kernbench replay: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError as exc:  # refused by a memory limit (RLIMIT_AS, the machine): say so
        print(f"kernbench replay: {OUT_OF_MEMORY}: {type(exc).__name__}: {_one_line(exc)}"
              f"{_address_limit()}", file=sys.stderr)
        return EXIT_CRASH
    except BaseException as exc:  # noqa: BLE001 - a crash: one line, never a verdict
        print(f"kernbench replay: crash: {type(exc).__name__}: {_one_line(exc)}",
              file=sys.stderr)
        return EXIT_CRASH
    print(summary(result))
    return exit_code(result, args.require_reference)


def _serve_one(request: dict) -> dict:
    """One pool request: the exit code and, for 2 and 3, the one line a child would print."""
    importlib.invalidate_caches()  # a case module written since the last request is found
    try:
        from kernbench.replay.session import replay_in_process

        result = replay_in_process(request["path"], request.get("case"),
                                   run_id=request["run_id"],
                                   case_paths=request.get("case_paths") or (),
                                   threads=request.get("threads"),
                                   progress=True if request.get("progress") else None)
    except KernbenchError as exc:
        return {"code": EXIT_BAD_INPUT,
                "line": f"kernbench replay: {type(exc).__name__}: {_one_line(exc)}"}
    except BaseException as exc:  # noqa: BLE001 - a crash: one line, then this worker ends
        return {"code": EXIT_CRASH,
                "line": f"kernbench replay: crash: {type(exc).__name__}: {_one_line(exc)}"}
    return {"code": exit_code(result), "line": ""}


def serve() -> int:
    """A warm worker: replay one requested trace after another (``kernbench.replay.pool``).

    The reply carries the request's run id; the pool still reads the verdict from the trace
    and believes it only with that run id. After a crash the worker ends (its state is not
    trusted for the next trace)."""
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # prints of a case factory go to stderr, never into the replies
    # warm before the first request: numpy, pyarrow, the replay and the trace validator
    import kernbench.replay.session
    import kernbench.trace.validate  # noqa: F401
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        reply = {"run_id": request["run_id"], **_serve_one(request)}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
        if reply["code"] == EXIT_CRASH:
            return EXIT_CRASH
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
