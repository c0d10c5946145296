"""``python -m kernbench.replay PATH [--case MODULE:FUNC] [--require-reference]``.

This module *is* the replay process, so it always replays here (``--in-process`` is
accepted for symmetry with ``kb.replay``). Exit 0: verified (or, without
``--require-reference``, nothing to compare and no invalid read); 1: outputs wrong, an invalid
read, a reference failure, or unverified under ``--require-reference``; 2: bad input (one line
on stderr, no traceback); 3: the replay crashed (one line, no verdict written; a
``MemoryError`` — a memory limit refused an allocation — says ``out of memory``).

``kb.replay`` starts it isolated (see ``kernbench.replay.child``) with a fresh ``--run-id``
that goes into ``verdict.json`` and ``--parent-pid``: the child ends when that process does.
"""

from __future__ import annotations

import argparse
import ctypes
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
    parser.add_argument("path", help="trace directory (NAME.ktrace)")
    parser.add_argument("--case", default=None, metavar="MODULE:FUNC",
                        help="case factory giving the reference (default: the built-in case)")
    parser.add_argument("--require-reference", action="store_true",
                        help="exit 1 when there is no reference (replayed, not verified)")
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
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    try:
        from kernbench.replay.runner import replay_in_process

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


if __name__ == "__main__":
    sys.exit(main())
