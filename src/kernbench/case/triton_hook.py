"""``kbt.install()``: where no Triton package is importable, ``import triton`` (and
``triton.language``, ``triton.language.math``, ``triton.language.extra.libdevice``) resolve
to kernbench's stand-in modules. An installed ``triton`` is never shadowed.

It lives with the case loader, which calls it before importing a user's module; the
stand-in modules are served by name (``STAND_INS``), imported only when a kernel module
imports ``triton``. ``kernbench.triton`` re-exports it as ``kbt.install``."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

#: stand-in module name -> the kernbench module whose namespace it serves
STAND_INS: dict[str, str] = {
    "triton": "kernbench.triton.standin",
    "triton.language": "kernbench.triton.language",
    "triton.language.core": "kernbench.triton.language",
    "triton.language.math": "kernbench.triton.tlmath",
    "triton.language.standard": "kernbench.triton.standard",
    "triton.language.random": "kernbench.triton.random",
    "triton.language.extra": "kernbench.triton.extra",
    "triton.language.extra.libdevice": "kernbench.triton.libdevice",
    "triton.language.extra.cuda": "kernbench.triton.extra",
    "triton.language.extra.cuda.libdevice": "kernbench.triton.libdevice",
    "triton.tools": "kernbench.triton.descriptor",
    "triton.tools.tensor_descriptor": "kernbench.triton.descriptor",
}
_PACKAGES = frozenset({"triton", "triton.language", "triton.language.extra",
                       "triton.language.extra.cuda", "triton.tools"})
_KEEP = frozenset({"__getattr__", "__all__", "__doc__", "__version__"})


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        source = importlib.import_module(STAND_INS[spec.name])
        mod = types.ModuleType(spec.name, source.__doc__)
        mod.__dict__.update({k: v for k, v in vars(source).items()
                             if not k.startswith("__") or k in _KEEP})
        mod.__dict__["KERNBENCH_STAND_IN"] = True
        if spec.name in _PACKAGES:
            mod.__path__ = []
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: create_module filled the namespace."""


class StandInFinder(importlib.abc.MetaPathFinder):
    """Serves the stand-in modules by name (installed only when no ``triton`` exists)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in STAND_INS:
            return None
        return importlib.machinery.ModuleSpec(fullname, _LOADER,
                                              is_package=fullname in _PACKAGES)


_LOADER = _StandInLoader()
FINDER = StandInFinder()


def real_triton_available() -> bool:
    """Whether something other than kernbench provides ``import triton``."""
    mod = sys.modules.get("triton")
    if mod is not None:
        return not getattr(mod, "KERNBENCH_STAND_IN", False)
    if FINDER in sys.meta_path:
        return False
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def install() -> bool:
    """Make ``import triton`` resolve to the stand-in when nothing else provides it.
    Returns True when the stand-in is (now) the ``triton`` this process imports."""
    if FINDER in sys.meta_path:
        return True
    if real_triton_available():
        return False
    sys.meta_path.insert(0, FINDER)
    return True


def uninstall() -> None:
    """Remove the hook and any stand-in modules imported through it (tests)."""
    if FINDER in sys.meta_path:
        sys.meta_path.remove(FINDER)
    for name in list(sys.modules):
        if name in STAND_INS and getattr(sys.modules[name], "KERNBENCH_STAND_IN", False):
            del sys.modules[name]
