"""Phase 2: execute a recorded op log on real numbers and check it against a reference.

``replay(path)`` runs the replay in an isolated child process (``python -I``, see
``kernbench.replay.child``; the replay reads only the trace directory) and builds the
ReplayResult from the verdict that child wrote for this very run; ``in_process=True`` runs it
here, for debugging; ``pool=ReplayPool()`` runs it on a warm worker of that pool
(``kernbench.replay.pool``), the same isolation without a process start each. Importing this
package loads no numpy or pyarrow: the process that only starts the child stays light
(``replay_in_process`` and ``load_result`` load on first use).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernbench.replay.child import case_spec, run_child
from kernbench.replay.result import ReplayResult

if TYPE_CHECKING:
    from kernbench.case import Case
    from kernbench.replay.pool import ReplayPool

__all__ = ["replay", "ReplayResult", "ReplayPool", "replay_in_process", "load_result"]


def __getattr__(name: str) -> Any:
    if name in ("replay_in_process", "load_result"):
        from kernbench.replay import session

        return getattr(session, name)
    if name == "ReplayPool":
        from kernbench.replay.pool import ReplayPool

        return ReplayPool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def replay(path: str | Path, case: str | Case | Callable[..., Any] | None = None,
           in_process: bool = False, threads: int | None = None,
           progress: bool | None = None, outputs: bool = True,
           pool: ReplayPool | None = None) -> ReplayResult:
    """Phase 2: replay the trace at ``path`` and compare its outputs with the reference.

    ``case`` is a ``kb.Case``, a case factory or ``"module:function"`` (for cases that are
    not built in); by default the manifest's case name is looked up in the built-in registry.
    The module is found here (this process's sys.path, then the current directory) and the
    child is told where. A factory that cannot be imported by name from another process (a
    lambda, a local function, one defined in ``__main__``) is replayed in this process
    instead; so is a ``kb.Case`` (its own reference), unless a factory importable by name
    built it (the child rebuilds it from the recorded parameters).
    ``threads``: BLAS threads of the replay (default 1); ``progress``: show progress on the
    terminal (None: only when this process's stderr is one). ``outputs`` False: the result
    carries the verdict only, no output arrays (the command line needs no more).
    ``pool``: a ``kb.ReplayPool`` whose warm workers replay it (no process start).
    """
    named = None if in_process else case_spec(case)
    if named is None:
        from kernbench.replay.session import replay_in_process

        return replay_in_process(path, case, threads=threads, progress=progress)
    spec, where = named
    if pool is not None:
        return pool.run(path, spec, where, threads=threads, progress=progress, outputs=outputs)
    return run_child(path, spec, where, threads=threads, progress=progress, outputs=outputs)
