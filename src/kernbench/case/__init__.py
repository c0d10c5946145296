"""Case authoring: ``Case``, HBM tensors and their inits, factories, ``-p`` params and the
built-in references (the built-in case registry is ``kernbench.kernels.registry``).

Names load on first use, so ``kernbench.case.factory`` (``locate``, run by the process that
only starts a replay child) costs no numpy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernbench.case.case import (
        Case,
        CaseFactory,
        factory_params,
        json_params,
        kernel_name,
        register_case,
        registered,
    )
    from kernbench.case.tensors import (
        ROLES,
        Init,
        TensorSpec,
        arange,
        data,
        init_from_json,
        randn,
        tensor,
        zeros,
    )

#: public name -> the module defining it
_LAZY = {**dict.fromkeys(["Case", "CaseFactory", "factory_params", "json_params", "kernel_name",
                          "register_case", "registered"], "kernbench.case.case"),
         **dict.fromkeys(["ROLES", "Init", "TensorSpec", "arange", "data", "init_from_json",
                          "randn", "tensor", "zeros"], "kernbench.case.tensors")}

__all__ = ["Case", "CaseFactory", "Init", "ROLES", "TensorSpec", "arange", "data",
           "factory_params", "init_from_json", "json_params", "kernel_name", "randn",
           "register_case", "registered", "tensor", "zeros"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
