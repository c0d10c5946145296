"""Kernel objects: the stand-in ``triton.jit`` / ``autotune`` / ``heuristics`` wrappers, and
``unwrap``, which takes the Python function and its launch layers out of a real Triton
``JITFunction`` / ``Autotuner`` / ``Heuristics`` or a stand-in one.

A kernel object needs two things from the layer that runs it (ADR-0625): ``kernel[grid](...)``
launches through the active ``Host``'s ``launch``, and a helper called inside a kernel body
runs as the host's ``rebind(fn)``. The active host is a context variable set for the duration
by its owner (``kbt.capture``, the launch adapter of one program); outside both it refuses.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import FunctionType
from typing import NoReturn, Protocol

from kernbench.errors import BadInputError

#: a launch grid as Triton takes it: 1 to 3 ints, or a function of the meta-parameters
Grid = int | Sequence[int] | Callable[[dict[str, object]], int | Sequence[int]]
#: a heuristic of ``triton.heuristics``: the launch's values -> one meta-parameter
Heuristic = Callable[[dict[str, object]], object]


class ConfigLike(Protocol):
    """An autotuning candidate (ours or Triton's ``triton.Config``) as a launch reads it."""

    @property
    def kwargs(self) -> Mapping[str, object]: ...
    @property
    def num_warps(self) -> int: ...
    @property
    def num_stages(self) -> int: ...


class Config:
    """``triton.Config``: meta-parameters and launch options of one autotuning candidate."""

    def __init__(self, kwargs: Mapping[str, object], num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: int | None = None,
                 pre_hook: Callable[..., object] | None = None, **_options: object) -> None:
        self.kwargs, self.num_warps, self.num_stages = dict(kwargs), num_warps, num_stages
        self.num_ctas, self.maxnreg, self.pre_hook = num_ctas, maxnreg, pre_hook

    def all_kwargs(self) -> dict[str, object]:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __repr__(self) -> str:
        return f"Config({self.kwargs}, num_warps={self.num_warps}, num_stages={self.num_stages})"


# -- the host a kernel object runs on --------------------------------------------------------
class Host(Protocol):
    """What a kernel object asks of the layer above: a launch, and a helper's rebinding."""

    def launch(self, kernel: object, grid: Grid, args: tuple[object, ...],
               kwargs: dict[str, object]) -> None: ...

    def rebind(self, fn: FunctionType) -> FunctionType: ...


class Outside:
    """The host while no capture and no kernel program is active: both requests refused."""

    def launch(self, kernel: object, grid: Grid, args: tuple[object, ...],
               kwargs: dict[str, object]) -> NoReturn:
        raise BadInputError(f"{kernel!r}[grid](...) outside kbt.capture: kernbench records "
                            "Triton launches only inside `with kbt.capture(dir):` (or build a "
                            "case with kbt.case)")

    def rebind(self, fn: FunctionType) -> NoReturn:
        raise BadInputError(f"{fn!r}: a Triton helper runs only inside a kernel being recorded")


OUTSIDE = Outside()
_HOST: ContextVar[Host] = ContextVar("kernbench.triton.host", default=OUTSIDE)


def current_host() -> Host:
    """The innermost active host (``OUTSIDE`` when none is)."""
    return _HOST.get()


@contextmanager
def hosted_by(host: Host) -> Iterator[Host]:
    """``host`` is the active host inside the block; the previous one is back after it,
    however the block ends."""
    token = _HOST.set(host)
    try:
        yield host
    finally:
        _HOST.reset(token)


class KernelInterface:
    """``kernel[grid](*args, **meta)``: a launch, recorded when a ``kbt.capture`` is active."""

    def __getitem__(self, grid: Grid) -> Callable[..., None]:
        def launch(*args: object, **kwargs: object) -> None:
            current_host().launch(self, grid, args, kwargs)
        return launch


class JITFunction(KernelInterface):
    """What the stand-in ``@triton.jit`` returns."""

    def __init__(self, fn: FunctionType, **options: object) -> None:
        self.fn, self.options = fn, options
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", "?")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: object, **kwargs: object) -> object:
        """A helper called from inside a kernel body (by attribute path, not rebound)."""
        return current_host().rebind(self.fn)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"JITFunction({self.__module__}:{self.__qualname__})"


class Autotuner(KernelInterface):
    def __init__(self, fn: object, configs: list[Config], key: object = None,
                 **options: object) -> None:
        self.fn, self.configs, self.key, self.options = fn, list(configs), key, options


class Heuristics(KernelInterface):
    def __init__(self, fn: object, values: Mapping[str, Heuristic]) -> None:
        self.fn, self.values = fn, dict(values)


def jit(fn: FunctionType | None = None, **options: object
        ) -> JITFunction | Callable[[FunctionType], JITFunction]:
    """``@triton.jit`` and ``@triton.jit(...)``."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)


def autotune(configs: list[Config], key: object = None, **options: object
             ) -> Callable[[object], Autotuner]:
    return lambda fn: Autotuner(fn, configs, key, **options)


def heuristics(values: Mapping[str, Heuristic]) -> Callable[[object], Heuristics]:
    return lambda fn: Heuristics(fn, values)


@dataclass(frozen=True)
class ConfigLayer:
    """An autotuner's launch layer: its candidates (ours or Triton's), in order."""

    configs: list[ConfigLike]


@dataclass(frozen=True)
class HeuristicLayer:
    """A ``triton.heuristics`` launch layer: meta-parameter -> its heuristic."""

    values: dict[str, Heuristic]


@dataclass
class KernelInfo:
    """A kernel taken apart: its Python function and, outermost first, its launch layers."""

    fn: FunctionType
    layers: list[ConfigLayer | HeuristicLayer] = field(default_factory=list)

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
    def configs(self) -> list[ConfigLike] | None:
        for layer in self.layers:
            if isinstance(layer, ConfigLayer):
                return layer.configs
        return None


def unwrap(kernel: object) -> KernelInfo:
    """The Python function and launch layers of a Triton kernel object (real or stand-in)."""
    layers: list[ConfigLayer | HeuristicLayer] = []
    obj = kernel
    for _ in range(16):
        kind = type(obj).__name__
        if kind == "Autotuner" and hasattr(obj, "configs") and hasattr(obj, "fn"):
            layers.append(ConfigLayer(list(obj.configs)))
            obj = obj.fn
        elif kind == "Heuristics" and hasattr(obj, "values") and hasattr(obj, "fn"):
            layers.append(HeuristicLayer(dict(obj.values)))
            obj = obj.fn
        elif hasattr(obj, "fn") and inspect.isfunction(obj.fn):
            return KernelInfo(obj.fn, layers)
        elif inspect.isfunction(obj):
            return KernelInfo(obj, layers)
        else:
            break
    raise BadInputError(f"{kernel!r} is not a @triton.jit kernel (nor an autotune/heuristics "
                        "wrapper of one)")
