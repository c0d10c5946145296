"""Phase 2: execute a recorded op log on real numbers and check it against a reference.

``replay(path)`` runs ``python -m kernbench.replay PATH`` in a child process (the replay
reads only the trace directory) and builds the ReplayResult from what it wrote to
``PATH/replay/``; ``in_process=True`` runs it here, for debugging.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernbench import errors
from kernbench.errors import KernbenchError, ReplayError
from kernbench.replay.runner import ReplayResult, load_result, replay_in_process
from kernbench.replay.verdict import factory_spec

__all__ = ["replay", "ReplayResult", "replay_in_process", "load_result"]

#: errors a child may report on its one stderr line, by class name (no eval, a fixed table)
_ERRORS: dict[str, type[KernbenchError]] = {
    name: cls for name, cls in vars(errors).items()
    if isinstance(cls, type) and issubclass(cls, KernbenchError)
}
_LINE = re.compile(r"^kernbench replay: (\w+): (.*)$")


def _child_env() -> dict[str, str]:
    """This process's environment, with its sys.path so ``--case`` modules import alike."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def replay(path: str | Path, case: str | Callable[..., Any] | None = None,
           in_process: bool = False) -> ReplayResult:
    """Phase 2: replay the trace at ``path`` and compare its outputs with the reference.

    ``case`` is a case factory or ``"module:function"`` (for cases that are not built in);
    by default the manifest's case name is looked up in the built-in registry. A factory
    that cannot be imported by name from another process (a lambda, a local function, one
    defined in ``__main__``) is replayed in this process instead.
    """
    spec = case if case is None or isinstance(case, str) else factory_spec(case)
    if in_process or (case is not None and spec is None):
        return replay_in_process(path, case)
    cmd = [sys.executable, "-m", "kernbench.replay", str(path)]
    if spec is not None:
        cmd += ["--case", spec]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env())
    if proc.returncode in (0, 1):
        return load_result(path)
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {proc.returncode}"
    m = _LINE.match(last)
    if proc.returncode == 2 and m and m.group(1) in _ERRORS:
        raise _ERRORS[m.group(1)](m.group(2))
    raise ReplayError(f"replay process failed (exit {proc.returncode}): {last}")
