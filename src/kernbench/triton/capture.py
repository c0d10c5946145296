"""``kbt.capture(out_dir)``: inside it, every ``kernel[grid](*args, **meta)`` launch of
unmodified host code is recorded to its own trace, replayed on a warm replay worker (a
``kb.ReplayPool``: an isolated process, started once per capture), and its outputs are
written back into the host arrays, so the host code goes on."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import FunctionType, TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from kernbench.case.triton_hook import install
from kernbench.errors import ReplayError
from kernbench.triton import jit
from kernbench.triton.args import is_torch

if TYPE_CHECKING:
    from kernbench.case import Case
    from kernbench.replay.pool import ReplayPool
    from kernbench.trace.hw import HwConfig


class Capture:
    """A capture: where traces go, which hardware, the traces in launch order. While it is
    entered it is the active ``jit.Host`` (ADR-0625): ``kernel[grid](...)`` comes to
    ``launch``; the innermost entered capture wins."""

    def __init__(self, out_dir: str | Path, hw: HwConfig | str | Path | None = None,
                 pool: ReplayPool | None = None) -> None:
        self.out_dir, self.hw = Path(out_dir), hw
        self.traces: list[Path] = []
        self._patched: tuple[type, Callable[..., object]] | None = None
        #: one per entry: leaving it makes the host active before the entry active again
        self._hosting: list[ExitStack] = []
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
        hosting = ExitStack()
        hosting.enter_context(jit.hosted_by(self))
        self._hosting.append(hosting)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._hosting.pop().close()
        if self._own_pool and self._pool is not None:
            self._pool.close()
            self._pool = None  # a capture entered again starts a pool of its own
        if self._patched is not None:
            cls, original = self._patched
            setattr(cls, "__getitem__", original)  # noqa: B010 - Triton's class, as it was
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

        def getitem(kernel: object, grid: jit.Grid) -> Callable[..., object]:
            if jit.current_host() is jit.OUTSIDE:  # no capture here (another thread's)
                return original(kernel, grid)
            return lambda *args, **kwargs: jit.current_host().launch(kernel, grid, args, kwargs)

        cls.__getitem__ = getitem
        self._patched = (cls, original)

    def launch(self, kernel: object, grid: jit.Grid, args: tuple[object, ...],
               kwargs: dict[str, object]) -> None:
        """``kernel[grid](*args, **kwargs)`` in host code: recorded, replayed, written back."""
        from kernbench.record.recorder import record
        from kernbench.replay import replay
        from kernbench.replay.result import summary
        from kernbench.triton.launch import ALL, case

        given: dict[str, Any] = kwargs  # the launch's keywords, kbt.case's options among them
        c = case(kernel, grid, *args, outputs=ALL, **given)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", c.name)
        path = self.out_dir / f"{len(self.traces):04d}-{stem}.ktrace"
        record(c, out=path, hw=self.hw)
        self.traces.append(path)
        res = replay(path, pool=self._pool)
        if res.status in ("wrong", "failed"):  # a launch without a reference is unverified
            raise ReplayError(f"replaying the launch of {c.name} ({path}) failed: "
                              f"{summary(res)}")
        host = _host_objects(c, args, kwargs, kernel)
        for name, value in res.outputs.items():
            if name in host:
                write_back(host[name], value)

    def rebind(self, fn: FunctionType) -> NoReturn:
        """A helper called in host code: refused as outside a capture."""
        jit.OUTSIDE.rebind(fn)


def _host_objects(c: Case, args: tuple[object, ...], kwargs: dict[str, object],
                  kernel: object) -> dict[str, object]:
    from kernbench.triton.jit import unwrap

    names = [p.name for p in unwrap(kernel).params]
    bound = {**dict(zip(names, args, strict=False)), **kwargs}
    return {n: v for n, v in bound.items() if n in c.tensors}


def write_back(host: object, value: np.ndarray) -> None:
    """Copy replayed outputs into the caller's array (numpy or CPU torch tensor; a tensor
    descriptor's base)."""
    from kernbench.triton.descriptor import is_descriptor

    if is_descriptor(host) and hasattr(host, "base"):
        host = host.base
    if is_torch(host):
        from kernbench.triton.args import host_array

        arr = host_array("output", host)
        arr[...] = value.reshape(arr.shape)
    else:
        arr = np.asarray(host)  # the caller's array itself
        np.copyto(arr, value.reshape(arr.shape), casting="unsafe")


def capture(out_dir: str | Path, hw: HwConfig | str | Path | None = None,
            pool: ReplayPool | None = None) -> Capture:
    """``with kbt.capture(out_dir) as cap:`` — record and replay every launch inside.
    ``pool``: a ``kb.ReplayPool`` to replay on (default: one of this capture's own)."""
    return Capture(out_dir, hw, pool)

