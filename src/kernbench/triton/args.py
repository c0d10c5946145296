"""Binding a Triton launch: ``kernel[grid](*args, **meta)`` to parameter values, with the
autotune config and heuristics applied, host arrays (numpy, CPU torch) classified."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, SupportsIndex, SupportsInt

import numpy as np

from kernbench.errors import BadInputError, closest
from kernbench.schemas import dtypes as kb_dtypes
from kernbench.triton.descriptor import HostSpec, host_spec, is_descriptor
from kernbench.triton.jit import ConfigLayer, ConfigLike, Grid, KernelInfo

_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")


def is_torch(x: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def host_array(name: str, x: Any) -> np.ndarray:  # Any: a torch tensor (torch has no types)
    """A numpy array with the bytes the kernel sees (a view for torch CPU tensors)."""
    if is_torch(x):
        if x.device.type != "cpu":
            raise BadInputError(f"argument {name} is a torch tensor on {x.device}; kernbench "
                                "takes CPU tensors")
        if not x.is_contiguous():
            raise BadInputError(f"argument {name} is not contiguous; pass x.contiguous()")
        if str(x.dtype) == "torch.bfloat16":
            import ml_dtypes
            import torch

            return x.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return x.detach().numpy()
    arr = np.asarray(x)
    if not arr.flags.c_contiguous:
        raise BadInputError(f"argument {name} is not C-contiguous (the kernel's strides would "
                            "not match the recorded bytes); pass np.ascontiguousarray(x)")
    return arr


def kb_dtype_name(name: str, arr: np.ndarray) -> str:
    dt = kb_dtypes.DTYPES.get(arr.dtype.name)  # by name first: bfloat16's ``np`` is lazy
    if dt is not None and dt.np == arr.dtype:
        return dt.name
    why = kb_dtypes.WHY_NOT.get(arr.dtype.name)
    raise BadInputError(f"argument {name} has dtype {arr.dtype}, which kernbench's trace "
                        f"format does not hold ({why + '; ' if why else ''}supported: "
                        f"{', '.join(kb_dtypes.DTYPES)})")


@dataclass
class Launch:
    """One bound launch. ``values``: parameter -> value as the kernel gets it (host arrays
    as numpy); ``arrays`` / ``scalars`` / ``constexprs``: parameter names by kind, in
    parameter order; ``host``: the caller's objects of the arrays (write-back)."""

    info: KernelInfo
    values: dict[str, object]
    arrays: list[str]
    scalars: list[str]
    constexprs: list[str]
    host: dict[str, object]
    grid: tuple[int, ...]
    num_warps: int = 4
    num_stages: int | None = None
    config: int | None = None
    options: dict[str, object] = field(default_factory=dict)
    #: array parameters given as host tensor descriptors: their geometry (the base is the array)
    descriptors: dict[str, HostSpec] = field(default_factory=dict)

    def array(self, name: str) -> np.ndarray:
        """The numpy array of array parameter ``name``."""
        v = self.values[name]
        assert isinstance(v, np.ndarray), f"{name} is not an array parameter of the launch"
        return v


def _launch_int(name: str, v: object) -> int:
    """A launch option's value (``num_warps``, ``num_stages``) as an int."""
    if isinstance(v, str | SupportsInt | SupportsIndex):
        try:
            return int(v)
        except (ValueError, OverflowError):  # "two", nan, inf: the same one-line refusal
            pass
    raise BadInputError(f"{name}={v!r} is not an int")


def _apply_config(values: dict[str, object], configs: list[ConfigLike], index: int | None,
                  given: set[str]) -> tuple[int, ConfigLike]:
    i = 0 if index is None else int(index)
    if not 0 <= i < len(configs):
        raise BadInputError(f"config={i} is outside the kernel's {len(configs)} autotune "
                            "configs")
    cfg = configs[i]
    clash = sorted(set(cfg.kwargs) & given)
    if clash:
        raise BadInputError(f"meta-parameters {clash} are given and also set by autotune "
                            f"config {i} ({cfg.kwargs})")
    values.update(cfg.kwargs)
    return i, cfg


def bind(info: KernelInfo, grid: Grid, args: tuple[object, ...], meta: dict[str, object],
         num_warps: int | None = None, num_stages: int | None = None,
         config: int | None = None) -> Launch:
    params = info.params
    names = [p.name for p in params]
    if len(args) > len(names):
        raise BadInputError(f"{info.name} takes {len(names)} arguments, got {len(args)}")
    values: dict[str, object] = dict(zip(names, args, strict=False))
    # a launch option's name the kernel declares is an argument (Triton decides by the
    # signature): ``num_warps=`` of a kernel with a ``num_warps`` parameter is that parameter
    options = {k: meta.pop(k) for k in list(meta) if k in _LAUNCH_OPTIONS and k not in names}
    warps: object = options.pop("num_warps", num_warps)
    stages: object = options.pop("num_stages", num_stages)
    for k, v in meta.items():
        if k in values:
            raise BadInputError(f"argument {k} given positionally and by keyword")
        values[k] = v
    given = set(values)
    chosen = None
    explicit_stages = stages is not None
    for layer in info.layers:  # outermost first: an autotuner's config, then heuristics
        if isinstance(layer, ConfigLayer):
            chosen, cfg = _apply_config(values, layer.configs, config, given)
            warps = cfg.num_warps
            if not explicit_stages:
                stages = cfg.num_stages
            continue
        for k, fn in layer.values.items():
            v = fn(dict(values))
            if k in names or k not in _LAUNCH_OPTIONS:
                values[k] = v
            elif k == "num_warps":  # a heuristic that sets a launch option
                warps = v
            elif k == "num_stages":
                stages = v
    if config is not None and chosen is None:
        raise BadInputError(f"config={config} given, but {info.name} is not autotuned")
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise BadInputError(f"{info.name} has no parameter(s) {unknown}"
                            f"{closest(unknown[0], names)}; parameters: {names}")
    for p in params:
        if p.name not in values:
            if p.default is p.empty:
                raise BadInputError(f"{info.name}: missing argument {p.name}")
            values[p.name] = p.default
    consts = info.constexprs()
    arrays, scalars, host = [], [], {}
    descriptors: dict[str, HostSpec] = {}
    for n in names:
        v = values[n]
        if n in consts:
            continue
        if is_descriptor(v) and hasattr(v, "base"):  # its base is the HBM tensor
            descriptors[n] = host_spec(n, v)
            host[n] = v.base
            values[n] = host_array(n, v.base)
            arrays.append(n)
        elif isinstance(v, np.ndarray) or is_torch(v):
            host[n] = v
            values[n] = host_array(n, v)
            arrays.append(n)
        elif isinstance(v, _SCALARS):
            scalars.append(n)
        elif v is not None:
            raise BadInputError(f"argument {n}={v!r} is neither an array nor a scalar")
    got = grid({**host, **{k: v for k, v in values.items() if k not in host}}) if callable(
        grid) else grid
    dims: Sequence[int] = (got,) if isinstance(got, int | np.integer) else tuple(got)
    g = tuple(int(x) for x in dims)
    if not 1 <= len(g) <= 3 or any(x <= 0 for x in g):
        raise BadInputError(f"grid {g} must be 1 to 3 positive ints")
    return Launch(info, values, arrays, scalars, [n for n in names if n in consts], host, g,
                  4 if warps is None else _launch_int("num_warps", warps),
                  None if stages is None else _launch_int("num_stages", stages), chosen,
                  options, descriptors)
