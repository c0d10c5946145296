"""Case factories named ``module:qualname``: locate, import, and name them back.

``locate`` finds where a module would be imported from in *this* process (its sys.path, then
the current directory, as the user ran the command) without importing it, so the replay child
can be given that exact location (ADR-0101). ``load_factory`` imports and returns the factory.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernbench.errors import BadInputError

#: what a factory spec looks like; a spec read from a trace is only quoted if it matches this
SPEC_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def split_spec(spec: str) -> tuple[str, str]:
    module_name, sep, qualname = spec.partition(":")
    if not sep or not module_name or not qualname:
        raise BadInputError(f"--case {spec!r} is not MODULE:FUNC")
    return module_name, qualname


def locate(spec: str) -> list[str]:
    """The directories to put on a fresh interpreter's sys.path so that ``spec``'s module
    imports from where it would import here ([] for built-in/frozen modules).

    Searches this process's sys.path, then the current directory; imports nothing.
    """
    module_name, _ = split_spec(spec)
    top = module_name.split(".")[0]
    loaded = sys.modules.get(top)
    found = getattr(loaded, "__spec__", None) if loaded is not None else None
    if found is None:
        try:
            found = importlib.machinery.PathFinder.find_spec(top, [*sys.path, os.getcwd()])
        except (ImportError, ValueError):
            found = None
        if found is None and top in sys.builtin_module_names:
            return []
    if found is None:
        raise BadInputError(f"--case {spec!r}: cannot import {module_name!r} (no module "
                            f"{top!r} on sys.path or in {os.getcwd()!r})")
    places = list(found.submodule_search_locations or [])
    if not places and found.origin and os.path.isfile(found.origin):
        places = [found.origin]
    roots = []
    for place in places:
        root = str(Path(place).resolve().parent)
        if root not in roots:
            roots.append(root)
    return roots


def load_factory(spec: str, paths: Sequence[str] = ()) -> Callable[..., Any]:
    """The callable named ``module:qualname`` (the user's ``--case``); BadInputError otherwise.

    ``paths`` (from ``locate`` in the process the user ran) are appended to sys.path; the
    module must then import from one of them.
    """
    module_name, qualname = split_spec(spec)
    for p in paths:
        if p not in sys.path:
            sys.path.append(p)
    from kernbench.case.triton_hook import install  # not for ``locate`` (ADR-0680)

    install()  # a Triton kernel module imports triton: the stand-in where none is installed
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise BadInputError(f"--case {spec!r}: cannot import {module_name!r} ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while importing
        raise BadInputError(f"--case {spec!r}: importing {module_name!r} failed: "
                            f"{type(exc).__name__}: {exc}") from None
    if paths:
        top = sys.modules.get(module_name.split(".")[0])
        where = [str(Path(p).resolve()) for p in getattr(top, "__path__", None) or
                 [getattr(top, "__file__", None) or ""]]
        if not any(w.startswith(str(Path(root).resolve()) + os.sep) for w in where
                   for root in paths):
            raise BadInputError(f"--case {spec!r}: {module_name!r} imports from {where[0]!r}, "
                                f"not from {list(paths)!r}")
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise BadInputError(f"--case {spec!r}: {module_name!r} has no {qualname!r}")
    if not callable(obj):
        raise BadInputError(f"--case {spec!r} is not callable")
    return obj


def load_user_factory(spec: str) -> Callable[..., Any]:
    """Import a factory the user named on this process's command line (cwd searched last)."""
    return load_factory(spec, locate(spec))


def factory_spec(factory: Callable[..., Any]) -> str | None:
    """``module:qualname`` that imports back to ``factory`` in another process, else None."""
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    spec = f"{module}:{qualname}"
    try:
        return spec if load_factory(spec) is factory else None
    except BadInputError:
        return None
