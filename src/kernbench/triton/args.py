"""Binding a Triton launch: ``kernel[grid](*args, **meta)`` to parameter values, with the
autotune config and heuristics applied, host arrays (numpy, CPU torch) classified."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernbench.errors import BadInputError, closest
from kernbench.schemas import dtypes as kb_dtypes
from kernbench.triton.descriptor import HostSpec, host_spec, is_descriptor
from kernbench.triton.jit import KernelInfo

_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")


def is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def host_array(name: str, x: Any) -> np.ndarray:
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
    values: dict[str, Any]
    arrays: list[str]
    scalars: list[str]
    constexprs: list[str]
    host: dict[str, Any]
    grid: tuple[int, ...]
    num_warps: int = 4
    num_stages: int | None = None
    config: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    #: array parameters given as host tensor descriptors: their geometry (the base is the array)
    descriptors: dict[str, HostSpec] = field(default_factory=dict)


def _apply_config(values: dict[str, Any], configs: list[Any], index: int | None,
                  given: set[str]) -> tuple[int, Any]:
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


def bind(info: KernelInfo, grid: Any, args: tuple[Any, ...], meta: dict[str, Any],
         num_warps: int | None = None, num_stages: int | None = None,
         config: int | None = None) -> Launch:
    params = info.params
    names = [p.name for p in params]
    if len(args) > len(names):
        raise BadInputError(f"{info.name} takes {len(names)} arguments, got {len(args)}")
    values: dict[str, Any] = dict(zip(names, args, strict=False))
    # a launch option's name the kernel declares is an argument (Triton decides by the
    # signature): ``num_warps=`` of a kernel with a ``num_warps`` parameter is that parameter
    options = {k: meta.pop(k) for k in list(meta) if k in _LAUNCH_OPTIONS and k not in names}
    if "num_warps" in options:
        num_warps = options.pop("num_warps")
    if "num_stages" in options:
        num_stages = options.pop("num_stages")
    for k, v in meta.items():
        if k in values:
            raise BadInputError(f"argument {k} given positionally and by keyword")
        values[k] = v
    given = set(values)
    chosen = None
    explicit_stages = num_stages is not None
    for kind, layer in info.layers:  # outermost first: an autotuner's config, then heuristics
        if kind == "configs":
            chosen, cfg = _apply_config(values, layer, config, given)
            num_warps = cfg.num_warps
            if not explicit_stages:
                num_stages = cfg.num_stages
            continue
        for k, fn in layer.items():
            v = fn(dict(values))
            if k in names or k not in _LAUNCH_OPTIONS:
                values[k] = v
            elif k == "num_warps":  # a heuristic that sets a launch option
                num_warps = v
            elif k == "num_stages":
                num_stages = v
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
        if is_descriptor(v):  # its base is the HBM tensor; the kernel sees a descriptor
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
    g = grid({**host, **{k: v for k, v in values.items() if k not in host}}) if callable(
        grid) else grid
    g = (g,) if isinstance(g, int | np.integer) else tuple(g)
    g = tuple(int(x) for x in g)
    if not 1 <= len(g) <= 3 or any(x <= 0 for x in g):
        raise BadInputError(f"grid {g} must be 1 to 3 positive ints")
    return Launch(info, values, arrays, scalars, [n for n in names if n in consts], host, g,
                  4 if num_warps is None else int(num_warps),
                  None if num_stages is None else int(num_stages), chosen, options,
                  descriptors)
