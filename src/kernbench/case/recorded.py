"""What a trace recorded about its tensors, told to a case factory while replay rebuilds it.

``replay --case`` rebuilds the case only for its reference and to check that it matches the
recording; the recorded roles already say which tensors are outputs. A front end that would
otherwise find its outputs by a dry recording (``kbt.case`` with ``outputs=None``) asks
``recorded_roles()`` first; outside a replay it gets None.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

_ROLES: ContextVar[Mapping[str, str] | None] = ContextVar("kernbench_recorded_roles",
                                                          default=None)


@contextmanager
def replaying_roles(roles: Mapping[str, str]) -> Iterator[None]:
    """Inside: ``recorded_roles()`` is ``roles`` (tensor name -> recorded role)."""
    token = _ROLES.set(dict(roles))
    try:
        yield
    finally:
        _ROLES.reset(token)


def recorded_roles() -> Mapping[str, str] | None:
    """The tensor roles of the trace being replayed, or None outside a replay."""
    return _ROLES.get()
