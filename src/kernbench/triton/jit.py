"""Kernel objects: the stand-in ``triton.jit`` / ``autotune`` / ``heuristics`` wrappers, and
``unwrap``, which takes the Python function and its launch layers out of a real Triton
``JITFunction`` / ``Autotuner`` / ``Heuristics`` or a stand-in one."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from kernbench.errors import BadInputError


class Config:
    """``triton.Config``: meta-parameters and launch options of one autotuning candidate."""

    def __init__(self, kwargs: Mapping[str, Any], num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: int | None = None, pre_hook: Any = None,
                 **_options: Any) -> None:
        self.kwargs, self.num_warps, self.num_stages = dict(kwargs), num_warps, num_stages
        self.num_ctas, self.maxnreg, self.pre_hook = num_ctas, maxnreg, pre_hook

    def all_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __repr__(self) -> str:
        return f"Config({self.kwargs}, num_warps={self.num_warps}, num_stages={self.num_stages})"


def outside_capture(kernel: Any, grid: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> NoReturn:
    raise BadInputError(f"{kernel!r}[grid](...) outside kbt.capture: kernbench records Triton "
                        "launches only inside `with kbt.capture(dir):` (or build a case with "
                        "kbt.case)")


def _unbound_rebind(fn: Callable[..., Any]) -> Callable[..., Any]:
    raise BadInputError(f"{fn!r}: a Triton helper runs only inside a kernel being recorded")


#: what the layers above provide (they bind themselves on import, as record/semantics.py
#: binds TensorHandle's operators): ``launch`` from kbt.capture, ``rebind`` from rebind.py
_BOUND: dict[str, Callable[..., Any]] = {"launch": outside_capture, "rebind": _unbound_rebind}


def bind(name: str, fn: Callable[..., Any]) -> None:
    """Called once by capture.py (``launch``) and rebind.py (``rebind``)."""
    _BOUND[name] = fn


class KernelInterface:
    """``kernel[grid](*args, **meta)``: a launch, recorded when a ``kbt.capture`` is active."""

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launch = _BOUND["launch"]
        return lambda *args, **kwargs: launch(self, grid, args, kwargs)


class JITFunction(KernelInterface):
    """What the stand-in ``@triton.jit`` returns."""

    def __init__(self, fn: Callable[..., Any], **options: Any) -> None:
        self.fn, self.options = fn, options
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", "?")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """A helper called from inside a kernel body (by attribute path, not rebound)."""
        return _BOUND["rebind"](self.fn)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"JITFunction({self.__module__}:{self.__qualname__})"


class Autotuner(KernelInterface):
    def __init__(self, fn: Any, configs: list[Config], key: Any = None, **options: Any) -> None:
        self.fn, self.configs, self.key, self.options = fn, list(configs), key, options


class Heuristics(KernelInterface):
    def __init__(self, fn: Any, values: Mapping[str, Callable[..., Any]]) -> None:
        self.fn, self.values = fn, dict(values)


def jit(fn: Any = None, **options: Any) -> Any:
    """``@triton.jit`` and ``@triton.jit(...)``."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)


def autotune(configs: list[Config], key: Any = None, **options: Any) -> Callable[[Any], Any]:
    return lambda fn: Autotuner(fn, configs, key, **options)


def heuristics(values: Mapping[str, Callable[..., Any]]) -> Callable[[Any], Any]:
    return lambda fn: Heuristics(fn, values)


@dataclass
class KernelInfo:
    """A kernel taken apart: its Python function and, outermost first, its launch layers
    (``("configs", [Config...])`` of an autotuner, ``("heuristics", {name: fn})``)."""

    fn: Callable[..., Any]
    layers: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.fn.__module__}:{self.fn.__qualname__}"

    @property
    def params(self) -> list[inspect.Parameter]:
        return list(inspect.signature(self.fn).parameters.values())

    def constexprs(self) -> set[str]:
        """Parameters annotated ``tl.constexpr`` (ours, Triton's, or the string under
        ``from __future__ import annotations``)."""
        out = set()
        for p in self.params:
            ann = p.annotation
            text = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
            if isinstance(text, str) and text.split(".")[-1] == "constexpr":
                out.add(p.name)
        return out

    @property
    def configs(self) -> list[Any] | None:
        for kind, value in self.layers:
            if kind == "configs":
                return value
        return None


def unwrap(kernel: Any) -> KernelInfo:
    """The Python function and launch layers of a Triton kernel object (real or stand-in)."""
    layers: list[tuple[str, Any]] = []
    obj = kernel
    for _ in range(16):
        kind = type(obj).__name__
        if kind == "Autotuner" and hasattr(obj, "configs"):
            layers.append(("configs", list(obj.configs)))
            obj = obj.fn
        elif kind == "Heuristics" and hasattr(obj, "values"):
            layers.append(("heuristics", dict(obj.values)))
            obj = obj.fn
        elif hasattr(obj, "fn") and inspect.isfunction(obj.fn):
            return KernelInfo(obj.fn, layers)
        elif inspect.isfunction(obj):
            return KernelInfo(obj, layers)
        else:
            break
    raise BadInputError(f"{kernel!r} is not a @triton.jit kernel (nor an autotune/heuristics "
                        "wrapper of one)")
