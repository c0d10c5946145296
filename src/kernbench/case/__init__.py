"""Case authoring: ``Case``, HBM tensors and their inits, factories, ``-p`` params and the
built-in references (the built-in case registry is ``kernbench.kernels.registry``)."""

from __future__ import annotations

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

__all__ = ["Case", "CaseFactory", "Init", "ROLES", "TensorSpec", "arange", "data",
           "factory_params", "init_from_json", "json_params", "kernel_name", "randn",
           "register_case", "registered", "tensor", "zeros"]
