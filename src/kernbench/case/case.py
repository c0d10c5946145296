"""Cases: kernel + grid + HBM tensors + params + reference, and ``register_case``.

The registry's store is here (a user's module may register its own cases); the built-in
cases are loaded and built by name in ``kernbench.kernels.registry``."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernbench.case.tensors import TensorSpec


@dataclass(frozen=True)
class Case:
    """A runnable workload."""

    name: str
    kernel: Any
    grid: tuple[int, ...]
    tensors: Mapping[str, TensorSpec]
    params: Mapping[str, Any] = field(default_factory=dict)
    reference: Callable[..., dict[str, np.ndarray]] | None = None
    #: the factory arguments that rebuild this case (set by the registry)
    case_params: Mapping[str, Any] | None = None
    #: the factory that built it, as data (``module:qualname``), and whether it is registered
    factory: str | None = None
    builtin: bool = False

    def inputs(self) -> dict[str, np.ndarray]:
        """The initial contents of every tensor, by name."""
        return {n: t.init.make(t.shape, t.dtype) for n, t in self.tensors.items()}


CaseFactory = Callable[..., Case]
_REGISTRY: dict[str, CaseFactory] = {}


def kernel_name(kernel: Any) -> str:
    """The kernel's stable name as the manifest records it (``module:qualname``)."""
    name = getattr(kernel, "name", None)
    if isinstance(name, str) and hasattr(kernel, "fn"):
        return name
    return f"{getattr(kernel, '__module__', '?')}:{getattr(kernel, '__qualname__', '?')}"


def json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params that survive a JSON manifest (scalars); others rebuild from defaults."""
    return {k: v for k, v in params.items()
            if v is None or isinstance(v, bool | int | float | str)}


def register_case(name: str) -> Callable[[CaseFactory], CaseFactory]:
    """Register a case factory under ``name`` (``kernbench record NAME -p K=V``).

    The registered factory marks every Case it returns as built in, with its factory spec and
    the full parameters it was built with, so a replay can rebuild it by name.
    """

    def deco(factory: CaseFactory) -> CaseFactory:
        spec = f"{factory.__module__}:{factory.__qualname__}"

        @functools.wraps(factory)
        def build(*args: Any, **kwargs: Any) -> Case:
            case = factory(*args, **kwargs)
            if not isinstance(case, Case):
                return case
            bound = inspect.signature(factory).bind(*args, **kwargs)
            bound.apply_defaults()
            return dataclasses.replace(case, factory=spec, builtin=True,
                                       case_params=json_params(bound.arguments))

        _REGISTRY[name] = build
        return build

    return deco


def registered() -> dict[str, CaseFactory]:
    """The cases registered so far (the built-in ones once ``kernbench.kernels`` is loaded)."""
    return dict(_REGISTRY)


def factory_params(factory: CaseFactory) -> dict[str, Any]:
    """The factory's parameters and their defaults."""
    sig = inspect.signature(factory)
    return {n: p.default for n, p in sig.parameters.items()
            if p.default is not inspect.Parameter.empty}
