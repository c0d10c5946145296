"""``python -m kernbench.replay PATH [--case MODULE:FUNC] [--in-process]``.

This module *is* the replay process, so it always replays here (``--in-process`` is
accepted for symmetry with ``kb.replay``). Exit 0: verified (or nothing to compare and no
invalid read); 1: outputs wrong, an invalid read, or a reference failure; 2: bad input
(one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kernbench.errors import BadInputError, TraceFormatError
from kernbench.replay.runner import ReplayResult, replay_in_process

EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT = 0, 1, 2


def summary(result: ReplayResult) -> str:
    """One line saying what replay found."""
    v = result.verdict
    head = f"{v['n_executed']}/{v['n_ops']} ops"
    if v.get("invalid_read"):
        return f"FAILED: {head}: {v['invalid_read']['message']}"
    if v.get("error"):
        return f"FAILED: {head}: {v['error']}"
    checked = {n: o for n, o in v["outputs"].items() if o.get("checked")}
    if v.get("reference") is None:
        return f"replayed {head}, no invalid reads; not verified: {v.get('reference_note')}"
    errs = ", ".join(f"{n} max_abs_err={o['max_abs_err']:.3g}" if o["max_abs_err"] is not None
                     else f"{n} {o.get('message')}" for n, o in checked.items())
    word = "verified" if result.ok else "WRONG"
    nonfinite = v.get("first_nonfinite")
    extra = (f"; first non-finite value from op {nonfinite['op_id']} ({nonfinite['name']} at "
             f"{nonfinite['src']})" if nonfinite and not result.ok else "")
    return f"{word}: {head} against {v['reference']}: {errs or 'no outputs compared'}{extra}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernbench.replay",
                                     description="Replay a kernbench trace on real numbers.")
    parser.add_argument("path", help="trace directory (NAME.ktrace)")
    parser.add_argument("--case", default=None, metavar="MODULE:FUNC",
                        help="case factory giving the reference (default: the built-in case)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="BLAS threads for the replay (default 1)")
    parser.add_argument("--in-process", action="store_true",
                        help="accepted for symmetry with kb.replay; this is the replay process")
    args = parser.parse_args(argv)
    try:
        result = replay_in_process(args.path, args.case, threads=args.threads)
    except (TraceFormatError, BadInputError) as exc:
        msg = " ".join(str(exc).split())
        print(f"kernbench replay: {type(exc).__name__}: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(summary(result))
    return EXIT_OK if result.ok else EXIT_WRONG


if __name__ == "__main__":
    sys.exit(main())
