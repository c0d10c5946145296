"""User case modules written into a temp dir by the trust tests (a kernel outside the package).

``USER_MODULE`` defines ``double_case``: y = 2 * x, with a factory parameter ``rows`` that is
not a kernel param (so a case rebuilt with default arguments differs in its tensor shapes),
and ``softmax_named`` — a user case named like a built-in, with its own kernel.
``reference`` switches what the reference does, for the crash tests (user code that runs in
the replay child, not a hook in kernbench).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

USER_MODULE = '''
from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

import kernbench as kb
from kernbench import tl


@kb.kernel
def double(x, y, *, n: int, tile: int):
    pid = tl.program_id(0)
    for j in range(n // tile):
        with tl.scratch_scope():
            a = tl.load(x + pid * n + j * tile, (tile,), tl.float32)
            tl.store(y + pid * n + j * tile, a * 2.0)


class Boom(BaseException):
    """Not an Exception: escapes every ``except Exception`` on its way out."""


def _pid_file():
    return os.environ.get("USERCASE_PID_FILE") or os.path.join(os.path.dirname(__file__), "pid")


def _reference(x):
    return {"y": x * 2.0}


def _kill(x):
    os.kill(os.getpid(), signal.SIGKILL)


def _exit0(x):
    os._exit(0)


def _sys_exit(x):
    sys.exit(0)


def _boom(x):
    raise Boom("user code blew up")


def _sleep(x):
    with open(_pid_file(), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
    return {"y": x * 2.0}


def _wrong(x):
    return {"y": x * 3.0}


REFERENCES = {"ok": _reference, "wrong": _wrong, "kill": _kill, "exit0": _exit0,
              "sys_exit": _sys_exit,
              "boom": _boom, "sleep": _sleep}


def double_case(rows: int = 2, n: int = 512, tile: int = 128, scale: float = 1.0,
                label: str = "double", reference: str = "ok") -> kb.Case:
    return kb.Case(
        name=label, kernel=double, grid=(rows,),
        tensors={"x": kb.tensor((rows, n), "float32", init=kb.randn(seed=1, scale=scale)),
                 "y": kb.tensor((rows, n), "float32", role="output")},
        params={"n": n, "tile": tile}, reference=REFERENCES[reference])


def _variant(reference):
    def factory(rows: int = 2, n: int = 512, tile: int = 128) -> kb.Case:
        return double_case(rows=rows, n=n, tile=tile, reference=reference)
    factory.__name__ = factory.__qualname__ = "double_" + reference
    return factory


for _ref in REFERENCES:
    globals()["double_" + _ref] = _variant(_ref)


def softmax_named(rows: int = 2, n: int = 512, tile: int = 128) -> kb.Case:
    return double_case(rows=rows, n=n, tile=tile, label="softmax")
'''


def write_user_module(folder: Path, name: str = "mycases") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(USER_MODULE)
    return path


def import_user_module(folder: Path, monkeypatch: Any) -> ModuleType:
    """Write ``mycases`` into ``folder`` and import it fresh from there (undone by
    ``monkeypatch``; the caller pops ``sys.modules["mycases"]`` when done)."""
    write_user_module(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "mycases", raising=False)
    return importlib.import_module("mycases")


HOSTILE = '''
import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "IMPORTED-" + __name__), "w").close()
raise ImportError("hostile module imported")
'''


def plant_hostile(folder: Path, names: tuple[str, ...] = ("ml_dtypes", "kernbench", "numpy",
                                                          "pyarrow", "mycases_helper")) -> None:
    """Modules that leave an ``IMPORTED-<name>`` marker in ``folder`` if ever imported."""
    for name in names:
        (folder / f"{name}.py").write_text(HOSTILE)


def imported_markers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("IMPORTED-*"))
