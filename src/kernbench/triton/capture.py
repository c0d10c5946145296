"""``kbt.capture(out_dir)``: inside it, every ``kernel[grid](*args, **meta)`` launch of
unmodified host code is recorded to its own trace, replayed on a warm replay worker (a
``kb.ReplayPool``: an isolated process, started once per capture), and its outputs are
written back into the host arrays, so the host code goes on."""

from __future__ import annotations

import re
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from kernbench.case.triton_hook import install
from kernbench.errors import ReplayError
from kernbench.triton import jit
from kernbench.triton.args import is_torch

_ACTIVE: list[Capture] = []


class Capture:
    """The active capture: where traces go, which hardware, the traces in launch order."""

    def __init__(self, out_dir: str | Path, hw: Any = None, pool: Any = None) -> None:
        self.out_dir, self.hw = Path(out_dir), hw
        self.traces: list[Path] = []
        self._patched: Any = None
        #: the replay pool: the caller's, or one of this capture's own (closed at the end)
        self._pool, self._own_pool = pool, pool is None

    def __enter__(self) -> Capture:
        install()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self._pool is None:
            from kernbench.replay.pool import ReplayPool

            self._pool = ReplayPool()
            self._pool.start(self.out_dir)  # warms up while the first launch is recorded
        self._patch_real_triton()
        _ACTIVE.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _ACTIVE.remove(self)
        if self._own_pool and self._pool is not None:
            self._pool.close()
            self._pool = None  # a capture entered again starts a pool of its own
        if self._patched is not None:
            cls, original = self._patched
            cls.__getitem__ = original
            self._patched = None

    def _patch_real_triton(self) -> None:
        """Route a real ``JITFunction`` / ``Autotuner`` launch here while the capture lasts."""
        import sys

        mod = sys.modules.get("triton")
        if mod is None or getattr(mod, "KERNBENCH_STAND_IN", False):
            return
        from triton.runtime import jit as real_jit

        cls = real_jit.KernelInterface
        original = cls.__dict__["__getitem__"]

        def getitem(kernel: Any, grid: Any) -> Any:
            if not _ACTIVE:
                return original(kernel, grid)
            return lambda *args, **kwargs: launch(kernel, grid, args, kwargs)

        cls.__getitem__ = getitem
        self._patched = (cls, original)

    def run(self, kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> None:
        from kernbench.record.recorder import record
        from kernbench.replay import replay
        from kernbench.replay.result import summary
        from kernbench.triton.launch import ALL, case

        c = case(kernel, grid, *args, outputs=ALL, **kwargs)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", c.name)
        path = self.out_dir / f"{len(self.traces):04d}-{stem}.ktrace"
        record(c, out=path, hw=self.hw)
        self.traces.append(path)
        res = replay(path, pool=self._pool)
        if not res.ok:
            raise ReplayError(f"replaying the launch of {c.name} ({path}) failed: "
                              f"{summary(res)}")
        host = _host_objects(c, args, kwargs, kernel)
        for name, value in res.outputs.items():
            if name in host:
                write_back(host[name], value)


def _host_objects(c: Any, args: tuple[Any, ...], kwargs: dict[str, Any], kernel: Any
                  ) -> dict[str, Any]:
    from kernbench.triton.jit import unwrap

    names = [p.name for p in unwrap(kernel).params]
    bound = {**dict(zip(names, args, strict=False)), **kwargs}
    return {n: v for n, v in bound.items() if n in c.tensors}


def write_back(host: Any, value: np.ndarray) -> None:
    """Copy replayed outputs into the caller's array (numpy or CPU torch tensor; a tensor
    descriptor's base)."""
    from kernbench.triton.descriptor import is_descriptor

    if is_descriptor(host):
        host = host.base
    if is_torch(host):
        from kernbench.triton.args import host_array

        arr = host_array("output", host)
        arr[...] = value.reshape(arr.shape)
    else:
        np.copyto(host, value.reshape(host.shape), casting="unsafe")


def capture(out_dir: str | Path, hw: Any = None, pool: Any = None) -> Capture:
    """``with kbt.capture(out_dir) as cap:`` — record and replay every launch inside.
    ``pool``: a ``kb.ReplayPool`` to replay on (default: one of this capture's own)."""
    return Capture(out_dir, hw, pool)


def launch(kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``kernel[grid](...)``: recorded by the innermost active capture."""
    if not _ACTIVE:
        jit.outside_capture(kernel, grid, args, kwargs)
    _ACTIVE[-1].run(kernel, grid, args, kwargs)


jit.bind("launch", launch)  # kernel[grid](...) of a stand-in JITFunction
