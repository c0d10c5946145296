"""``@kernbench.kernel``: marks a Python function as a kernel written against ``tl``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


class Kernel:
    """A kernel function plus its stable name (``module:qualname``)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = f"{fn.__module__}:{fn.__qualname__}"
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<kernel {self.name}>"


def kernel(fn: Callable[..., Any]) -> Kernel:
    """Decorator: positional args are HBM pointers, keyword-only args compile-time constants."""
    return fn if isinstance(fn, Kernel) else Kernel(fn)
