"""Schemas, versions and enums of the trace format (the single source of truth).

Submodules load on first use (``kernbench.schemas.X``, module ``__getattr__``): a process
that needs only ``dtypes`` or ``bf16`` (numpy) does not import pyarrow for ``arrow``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for type checkers (never imported at run time)
    from kernbench.schemas import arrow, dtypes, ops
    from kernbench.schemas.arrow import SCHEMA_VERSION
    from kernbench.schemas.ops import Engine, Kind, Op

__all__ = ["arrow", "dtypes", "ops", "SCHEMA_VERSION", "Engine", "Kind", "Op"]
#: public name -> the submodule defining it (a submodule itself where the names are equal)
_LAZY = {"arrow": "arrow", "dtypes": "dtypes", "ops": "ops", "SCHEMA_VERSION": "arrow",
         "Engine": "ops", "Kind": "ops", "Op": "ops"}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{where}")
    return module if where == name else getattr(module, name)
