"""One launch of a Triton kernel, described once and run two ways.

``Launch`` holds what ``kernel[grid](*args, **meta)`` needs plus a numpy reference.
``Launch.case()`` turns it into a kernbench case through ``kernbench.triton.case`` (docs/triton.md);
``interpret_main`` runs the same launches under Triton's interpreter (``TRITON_INTERPRET=1``,
torch CPU tensors) in a process of their own, npz in and npz out, so the test process never
imports torch.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Launch:
    name: str
    kernel: Any
    grid: tuple[int, ...] | Callable[[dict[str, Any]], tuple[int, ...]]
    args: tuple[Any, ...]
    meta: dict[str, Any]
    reference: Callable[..., dict[str, np.ndarray]] | None = None
    outputs: tuple[str, ...] | None = None
    num_stages: int | None = None

    def case(self) -> Any:
        from kernbench import triton as kbt

        extra = {} if self.num_stages is None else {"num_stages": self.num_stages}
        return kbt.case(self.kernel, self.grid, *self.args, name=self.name,
                        outputs=list(self.outputs) if self.outputs else None,
                        reference=self.reference, **extra, **self.meta)

    def arg_names(self) -> list[str]:
        """The kernel's positional parameter names (those ``args`` bind to)."""
        fn = getattr(self.kernel, "fn", self.kernel)
        while hasattr(fn, "fn"):  # autotune / heuristics wrappers
            fn = fn.fn
        return list(inspect.signature(fn).parameters)[: len(self.args)]

    def arrays(self) -> dict[str, np.ndarray]:
        """The array arguments by parameter name (copies: the launch's own stay pristine)."""
        return {n: np.array(_array(a)) for n, a in zip(self.arg_names(), self.args, strict=True)
                if isinstance(_array(a), np.ndarray)}

    def expected(self) -> dict[str, np.ndarray]:
        assert self.reference is not None
        return self.reference(**self.arrays())


def _array(arg: Any) -> Any:
    """The array of a launch argument: itself, or a tensor descriptor's base."""
    return arg.base if type(arg).__name__ == "TensorDescriptor" else arg


def grid_of(launch: Launch) -> tuple[int, ...]:
    g = launch.grid
    return tuple(g(dict(launch.meta)) if callable(g) else g)


def interpret_main(argv: list[str] | None = None) -> None:
    """``python -c 'from tests.triton.kernels.spec import interpret_main; interpret_main()'
    REQUEST.json``: REQUEST is a list of ``{"factory": "module:function", "params": {...},
    "inputs": "in.npz", "out": "out.npz"}``. Each launch runs under Triton's interpreter on
    the arrays of ``inputs`` (by parameter name); ``out`` receives every array argument after
    the launch. ``TRITON_INTERPRET=1`` must be set before this process imports triton."""
    import torch

    (request,) = argv if argv is not None else sys.argv[1:]
    with open(request) as f:
        jobs = json.load(f)
    for job in jobs:
        module, _, func = job["factory"].partition(":")
        launch: Launch = getattr(importlib.import_module(module), func)(**job["params"])
        given = dict(np.load(job["inputs"]))
        names = launch.arg_names()
        args = [torch.from_numpy(np.ascontiguousarray(given[n])) if n in given else a
                for n, a in zip(names, launch.args, strict=True)]
        args = [_triton_descriptor(t, a) if type(a).__name__ == "TensorDescriptor" else t
                for t, a in zip(args, launch.args, strict=True)]
        launch.kernel[grid_of(launch)](*args, **launch.meta)
        np.savez(job["out"], **{n: _array(a).numpy() for n, a in zip(names, args, strict=True)
                                if isinstance(_array(a), torch.Tensor)})


def _triton_descriptor(base: Any, desc: Any) -> Any:
    """kernbench's host descriptor ``desc`` as Triton's, over the torch tensor ``base``."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor(base, list(desc.shape), list(desc.strides),
                            list(desc.block_shape), desc.padding)
