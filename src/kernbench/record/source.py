"""The kernel source line that issued the current tl call (``file:line``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernbench.record.memo import BoundedMemo

_PKG_PARENT = str(Path(__file__).resolve().parents[2])  # the folder holding kernbench/
_RECORD_DIR = str(Path(__file__).resolve().parent)
_RECORD_IN = _RECORD_DIR + os.sep  # record/'s rooms (lowering/, machine/, rows/)
_TL_FILE = str(Path(__file__).resolve().parents[1] / "tl.py")
_CACHE: dict[tuple[str, int | None], str] = {}
_INTERNAL: dict[str, bool] = {}
#: more folders whose frames are front-end layers, not kernel source (mark_internal_dir)
_LAYER_DIRS: set[str] = set()


def mark_internal_dir(folder: str) -> None:
    """Treat frames of files in ``folder`` as tl layers (a front end built over tl)."""
    _LAYER_DIRS.add(os.path.realpath(folder))
    _INTERNAL.clear()


def _is_internal(filename: str) -> bool:
    known = _INTERNAL.get(filename)
    if known is None:
        real = os.path.realpath(filename)
        folder = os.path.dirname(real)
        known = _INTERNAL[filename] = (real == _TL_FILE or folder == _RECORD_DIR
                                       or folder.startswith(_RECORD_IN)
                                       or folder in _LAYER_DIRS)
    return known


def display_path(filename: str) -> str:
    """A stable spelling of a kernel file: package-relative, else cwd-relative, else as is."""
    real = os.path.realpath(filename)
    for root in (_PKG_PARENT, os.getcwd()):
        if real.startswith(root + os.sep):
            return os.path.relpath(real, root).replace(os.sep, "/")
    return real


#: ``file:line`` by frame position, (id of the code, ``f_lasti``) -> (code, ``file:line``):
#: no line-table walk per call; the entry keeps its code object alive, so no other code
#: takes that id while the entry lives; cleared when ``AT_LIMIT`` entries are held
_AT = BoundedMemo()
AT_LIMIT = 1 << 14


def src_here() -> str:
    """``file:line`` of the innermost frame outside kernbench's tl layers."""
    f = sys._getframe(2)  # src_here's caller is always a tl layer
    internal = _INTERNAL
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        known = internal.get(fn)
        if known is None:
            known = _is_internal(fn)
        if not known:
            break
        f = f.f_back  # type: ignore[assignment]
    if f is None:
        return "<unknown>:0"
    at = (id(code), f.f_lasti)
    got = _AT.get(at)
    if got is None:
        got = _AT.put(at, (code, _line(code.co_filename, f.f_lineno)), AT_LIMIT)
    return got[1]


def _line(filename: str, lineno: int | None) -> str:
    key = (filename, lineno)
    s = _CACHE.get(key)
    if s is None:
        s = _CACHE[key] = f"{display_path(filename)}:{lineno}"
    return s
