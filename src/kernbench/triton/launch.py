"""``kbt.case``: a Triton launch as a ``kb.Case``.

The case's kernel is an adapter ``@kb.kernel`` named after the Triton kernel: its positional
arguments are the HBM pointers of the array arguments (in parameter order), its keyword
params the launch's JSON-able values (scalar arguments, constexprs, ``num_warps``,
``num_stages``, ``config``) as the manifest records them. It runs the rebound kernel body
with Triton values: pointers, concrete scalar arguments, plain constexprs.

Default outputs are the arrays the kernel stores to (cached per kernel and argument shapes in
this process): the recording of the case sees its stores and settles the roles
(``case.stored_roles``); a look at a tensor's role before any recording makes a dry recording
of the launch to find them. ``outputs=`` skips both, and so does replay rebuilding a recorded
launch (the trace's tensor roles name the outputs).
"""

from __future__ import annotations

import os
import sysconfig
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FunctionType
from typing import NoReturn

import numpy as np

from kernbench.case import Case, data, tensor
from kernbench.case.recorded import recorded_roles
from kernbench.case.stored_roles import StoredRoles
from kernbench.errors import BadInputError, KernbenchError, KernelError
from kernbench.record.handle import Pointer
from kernbench.record.kernel import Kernel
from kernbench.record.lowering.lifetime import lifetime_scope
from kernbench.record.source import _is_internal, display_path, src_here
from kernbench.triton import arith, core, descriptor, memory
from kernbench.triton import dtypes as d
from kernbench.triton.args import Launch, bind, kb_dtype_name
from kernbench.triton.jit import Grid, hosted_by, unwrap
from kernbench.triton.rebind import Rebinder
from kernbench.triton.value import Concrete, pointer

#: every array is an output (kbt.capture writes them all back)
ALL = "all"
_STORED_CACHE: dict[tuple, frozenset[str]] = {}


def _user_src(exc: BaseException) -> str | None:
    """``file:line`` of the innermost frame of ``exc`` in the user's code: outside kernbench
    and outside installed libraries and the standard library (numpy's broadcasting, say)."""
    src = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        fn = frame.f_code.co_filename
        if not _is_internal(fn) and "kernbench" not in Path(fn).parts[-3:-1] \
                and not _library(fn):
            src = f"{display_path(fn)}:{line}"
    return src


_STDLIB = tuple(os.path.realpath(sysconfig.get_paths()[k]) + os.sep
                for k in ("stdlib", "platstdlib"))


def _library(filename: str) -> bool:
    """An installed package's, the standard library's or a frozen module's file."""
    parts = Path(filename).parts
    return (filename.startswith("<") or "site-packages" in parts or "dist-packages" in parts
            or os.path.realpath(filename).startswith(_STDLIB))


def _json_value(v: object) -> bool | int | float | str | None:
    """How the manifest records a launch value (dtypes by name; other objects by repr)."""
    if isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if type(v).__name__ == "dtype" and hasattr(v, "name"):
        return f"tl.{d.by_name(v.name).name}"
    return None if v is None else repr(v)


@dataclass(frozen=True)
class ProgramHost:
    """The host of a kernel body while one program of the launch runs (ADR-0625): a helper
    called by attribute path is rebound by the launch's rebinder; a launch is refused."""

    rebinder: Rebinder

    def launch(self, kernel: object, grid: Grid, args: tuple[object, ...],
               kwargs: dict[str, object]) -> NoReturn:
        raise KernelError(f"{kernel!r}[grid](...) inside a kernel body: Triton launches "
                          "kernels from host code only", src_here())

    def rebind(self, fn: FunctionType) -> FunctionType:
        return self.rebinder.function(fn)


def make_kernel(launch: Launch) -> Kernel:
    """The adapter ``@kb.kernel`` running ``launch``'s kernel body on Triton values."""
    info = launch.info
    rebinder = Rebinder()
    host, options = ProgramHost(rebinder), core.LaunchOptions(launch.num_stages)
    body: list[FunctionType] = []
    names = [p.name for p in info.params]  # once per launch, not once per program
    arrays = [n for n in names if n in launch.arrays]
    # scalar and constexpr arguments: the same in every program, in parameter order
    fixed = [n for n in names if n not in launch.arrays]
    scalars: dict[str, tuple[d.dtype, np.ndarray, tuple]] = {}  # dtype, values, memo key
    consts: dict[str, object] = {}

    def adapter(*ptrs: Pointer, **_recorded: object) -> None:
        if not body:
            body.append(rebinder.function(info.fn))
            for n in fixed:
                v = launch.values[n]
                if n in launch.scalars:
                    dt = d.of_scalar(v)
                    arr = np.asarray(v, dt.np)
                    arr.flags.writeable = False  # shared by every program's value
                    scalars[n] = (dt, arr, arith.array_key(dt, arr))
                else:
                    consts[n] = rebinder.value(v)
        kwargs: dict[str, object] = {}
        for n, p in zip(arrays, ptrs, strict=True):
            ptr = pointer(p.tensor, np.asarray(p.offset, np.int64), d.from_kb(p.tensor.dtype))
            spec = launch.descriptors.get(n)
            kwargs[n] = ptr if spec is None else descriptor.from_host(ptr, spec)
        for n in fixed:  # a fresh scalar tensor per program: programs share none
            kwargs[n] = Concrete(*scalars[n]) if n in scalars else consts[n]
        try:
            with hosted_by(host), core.launched_with(options), lifetime_scope():
                body[0](**kwargs)
                kwargs.clear()  # the arguments die inside the program's lifetime scope
        except KernbenchError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's kernel: one line at its source
            raise KernelError(f"{type(exc).__name__}: {exc}", _user_src(exc)) from None

    adapter.__module__ = info.fn.__module__
    adapter.__qualname__ = adapter.__name__ = info.fn.__qualname__
    adapter.__doc__ = info.fn.__doc__
    k = Kernel(adapter)
    k.name = info.name
    return k


def _params(launch: Launch) -> dict[str, object]:
    out: dict[str, object] = {}
    for n in (*launch.scalars, *launch.constexprs):
        v = _json_value(launch.values[n])
        if v is not None:
            out[n] = v
    names = {p.name for p in launch.info.params}  # a parameter named num_warps is the kernel's
    if "num_warps" not in names:
        out["num_warps"] = launch.num_warps
    if launch.num_stages is not None and "num_stages" not in names:
        out["num_stages"] = launch.num_stages
    if launch.config is not None:
        out["config"] = launch.config
    return out


def _build(launch: Launch, name: str, roles: dict[str, str],
           reference: Callable[..., dict[str, np.ndarray]] | None) -> Case:
    tensors = {n: tensor(_hbm_shape(launch.array(n)), kb_dtype_name(n, launch.array(n)),
                         init=data(launch.array(n).reshape(_hbm_shape(launch.array(n)))),
                         role=roles.get(n, "input"))
               for n in launch.arrays}
    scalar_arrays: dict[str, tuple[()]] = {n: () for n in launch.arrays
                                           if launch.array(n).ndim == 0}
    if reference is not None and scalar_arrays:
        reference = _zero_d_reference(reference, scalar_arrays)
    return Case(name=name, kernel=make_kernel(launch), grid=launch.grid, tensors=tensors,
                params=_params(launch), reference=reference)


def _hbm_shape(arr: np.ndarray) -> tuple[int, ...]:
    """A 0-d array is a one-element HBM tensor of shape (1,): a trace's tensors have at
    least one dimension; the kernel sees a pointer to its element either way."""
    return arr.shape or (1,)


def _zero_d_reference(reference: Callable[..., dict[str, np.ndarray]],
                      zero_d: dict[str, tuple[()]]) -> Callable[..., dict[str, np.ndarray]]:
    """``reference`` seeing its 0-d arrays as 0-d, its 0-d results as the (1,) tensors."""
    def ref(**arrays: np.ndarray) -> dict[str, np.ndarray]:
        given = {n: a.reshape(()) if n in zero_d else a for n, a in arrays.items()}
        got = reference(**given)
        return {n: np.asarray(v).reshape(1) if n in zero_d else v for n, v in got.items()}
    return ref


def _stored_key(launch: Launch, case: Case) -> tuple:
    return (id(launch.info.fn), launch.grid, tuple(sorted(case.params.items())),
            tuple((n, launch.array(n).shape, launch.array(n).dtype.str) for n in launch.arrays))


def _seen(key: tuple) -> frozenset[str]:
    """The arrays the recording that just ran stored to (kept for the next case like it)."""
    got = _STORED_CACHE[key] = frozenset(memory.STORED)
    memory.STORED.clear()
    return got


def stored_arrays(launch: Launch, case: Case) -> frozenset[str]:
    """The array parameters the kernel stores to (or updates atomically): a dry recording."""
    from kernbench.record.recorder import guarded, layout, run_programs
    from kernbench.record.rows.writer import OpWriter
    from kernbench.trace.hw import load_hw

    key = _stored_key(launch, case)
    got = _STORED_CACHE.get(key)
    if got is None:

        def dry(guards: bool) -> None:
            memory.STORED.clear()
            with tempfile.TemporaryDirectory(prefix="kbt-dry-") as tmp:
                writer = OpWriter(Path(tmp) / "ops.parquet")
                try:
                    run_programs(case, load_hw("ahbm-v1"), writer, layout(case), guards=guards)
                finally:
                    writer.abort()

        guarded(dry)
        got = _STORED_CACHE[key] = frozenset(memory.STORED)
        memory.STORED.clear()
    return got


def case(kernel: object, grid: Grid, *args: object, name: str | None = None,
         outputs: Sequence[str] | str | None = None,
         reference: Callable[..., dict[str, np.ndarray]] | None = None,
         num_warps: int | None = None, num_stages: int | None = None,
         config: int | None = None, **meta: object) -> Case:
    """A Triton launch ``kernel[grid](*args, **meta)`` as a ``kb.Case`` (docs/triton.md).
    ``num_warps=`` / ``num_stages=`` are the kernel's arguments when it declares parameters
    of those names (as Triton decides), launch options otherwise."""
    meta = dict(meta)
    for opt, v in (("num_warps", num_warps), ("num_stages", num_stages)):
        if v is not None:
            meta[opt] = v
    launch = bind(unwrap(kernel), grid, args, meta, config=config)
    name = name or launch.info.fn.__name__
    if outputs == ALL:
        outs = list(launch.arrays)
    elif outputs is not None:
        outs = [outputs] if isinstance(outputs, str) else list(outputs)
        bad = [o for o in outs if o not in launch.arrays]
        if bad:
            raise BadInputError(f"outputs {bad} are not array arguments of {launch.info.name} "
                                f"(arrays: {launch.arrays})")
    elif (recorded := recorded_roles()) is not None and set(recorded) == set(launch.arrays):
        # replay rebuilding a recorded launch: the trace's roles name the outputs
        outs = [n for n in launch.arrays if recorded[n] in ("output", "inout")]
    else:
        built = _build(launch, name, {}, reference)
        key = _stored_key(launch, built)
        stored = _STORED_CACHE.get(key)
        if stored is None:  # the recording settles the roles (or a dry one, looked at first)
            roles = StoredRoles(built.tensors, lambda: stored_arrays(launch, built),
                                memory.STORED.clear, lambda: _seen(key))
            return replace(built, tensors=roles)
        outs = [n for n in launch.arrays if n in stored]
    return _build(launch, name, dict.fromkeys(outs, "inout"), reference)


def launch_of(kernel: object, grid: Grid, args: tuple[object, ...], kwargs: dict[str, object]
              ) -> Launch:
    return bind(unwrap(kernel), grid, args, dict(kwargs))


__all__ = ["case", "ALL"]
