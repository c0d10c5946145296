"""Phase 2: execute a recorded op log on real numbers and check it against a reference.

``replay(path)`` runs the replay in an isolated child process (``python -I``, see
``kernbench.replay.child``; the replay reads only the trace directory) and builds the
ReplayResult from the verdict that child wrote for this very run; ``in_process=True`` runs it
here, for debugging.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernbench.case.factory import factory_spec, locate
from kernbench.replay.child import run_child
from kernbench.replay.runner import ReplayResult, load_result, replay_in_process

__all__ = ["replay", "ReplayResult", "replay_in_process", "load_result"]


def replay(path: str | Path, case: str | Callable[..., Any] | None = None,
           in_process: bool = False, threads: int | None = None,
           progress: bool | None = None) -> ReplayResult:
    """Phase 2: replay the trace at ``path`` and compare its outputs with the reference.

    ``case`` is a case factory or ``"module:function"`` (for cases that are not built in);
    by default the manifest's case name is looked up in the built-in registry. The module is
    found here (this process's sys.path, then the current directory) and the child is told
    where. A factory that cannot be imported by name from another process (a lambda, a local
    function, one defined in ``__main__``) is replayed in this process instead.
    ``threads``: BLAS threads of the replay (default 1); ``progress``: show progress on the
    terminal (None: only when this process's stderr is one).
    """
    spec = case if case is None or isinstance(case, str) else factory_spec(case)
    if in_process or (case is not None and spec is None):
        return replay_in_process(path, case, threads=threads, progress=progress)
    return run_child(path, spec, locate(spec) if spec is not None else (), threads=threads,
                     progress=progress)
