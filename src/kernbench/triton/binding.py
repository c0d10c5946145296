"""How ``tl.tensor``'s operators reach ``arith.py`` and ``core.py``.

``value.py`` defines ``tensor`` and sits below the modules that implement its operators
(Triton's promotion rules in ``arith.py``, indexing and ``.T`` in ``core.py``), so they
bind themselves here once ``core.py`` is imported (``bind_operators``); until then an
operator refuses in one line (as ``record/handle.py`` does for ``tl``'s handles).
"""

from __future__ import annotations

from typing import Any, Protocol

from kernbench.errors import KernelError


class Arith(Protocol):
    """What ``tensor``'s operators need of ``arith.py`` (each returns a ``Value``)."""

    def binary(self, op: str, a: object, b: object) -> Any: ...
    def unary(self, op: str, x: object) -> Any: ...
    def invert(self, x: object) -> Any: ...
    def cast(self, x: object, dt: object, bitcast: bool = False) -> Any: ...


class Core(Protocol):
    """What ``tensor``'s indexing and ``.T`` need of ``core.py`` (each returns a ``Value``)."""

    def index(self, x: Any, key: object) -> Any: ...
    def trans(self, x: Any, *dims: object) -> Any: ...


class _Unbound:
    """Stands in for arith and core until core.py binds them."""

    def _refuse(self, *_args: object, **_kw: object) -> Any:
        raise KernelError("Triton tensor operators need kernbench.triton.core; import "
                          "kernbench.triton.language")

    binary = unary = invert = cast = index = trans = _refuse


#: the operators' implementation, bound by core.py
arith: Arith = _Unbound()
core: Core = _Unbound()


def bind_operators(a: Arith, c: Core) -> None:
    """Called once by core.py: route ``tensor``'s operators through ``a`` and ``c``."""
    global arith, core
    arith, core = a, c
