"""``kb.record``: lay out the case's HBM tensors, run every program, write the trace atomically."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from kernbench import __version__
from kernbench.case import Case
from kernbench.case.stored_roles import StoredRoles, layout_specs
from kernbench.errors import BadInputError, ScratchOverflowError
from kernbench.record.guards.graph import NeedsGuards, Shadow
from kernbench.record.guards.hbm import Hbm
from kernbench.record.handle import HbmTensor, Pointer
from kernbench.record.kernel import Kernel
from kernbench.record.lowering.bounds import OpBound, check_grid, counted
from kernbench.record.machine.resident import occupancy
from kernbench.record.machine.runner import run_launch
from kernbench.record.rows.tensors import write_tensors
from kernbench.record.rows.writer import OpWriter
from kernbench.trace import DATA_FILES, OPTIONAL_FILES, Trace, file_sha256
from kernbench.trace.atomic import atomic_dir, outside_traces
from kernbench.trace.hw import HwConfig, load_hw

HBM_ALIGN = 4096
T = TypeVar("T")


def layout(case: Case) -> dict[str, HbmTensor]:
    """HBM placement: tensors in declaration order, each 4 KiB aligned, one address space."""
    out, cursor = {}, 0
    for name, spec in layout_specs(case.tensors).items():
        out[name] = HbmTensor(name, cursor, spec.shape, spec.dtype)
        cursor += -(-spec.nbytes // HBM_ALIGN) * HBM_ALIGN
    return out


def _check_params(case: Case) -> None:
    for k, v in case.params.items():
        if not isinstance(v, int | float | str | bool):
            raise BadInputError(f"case param {k}={v!r} is not an int, float, str or bool")
    if not case.grid or any(int(g) <= 0 for g in case.grid):
        raise BadInputError(f"case grid {case.grid!r} must be positive ints")


def shadow(case: Case, tensors: dict[str, HbmTensor], writer: OpWriter) -> Shadow:
    """The value graph of a recording with guards: the case's tensors (their initial
    contents made when a decision first reads them) and the access arrays ``writer`` keeps."""
    specs = layout_specs(case.tensors)
    hbm = Hbm({n: (t.addr, t.numel, t.dtype.storage,
                   partial(specs[n].init.storage_view, specs[n].shape, specs[n].dtype))
               for n, t in tensors.items()})
    return Shadow(hbm, writer.access.keep())


def guarded(run: Callable[[bool], T]) -> T:
    """``run(False)``, or when the kernel decides on data (``NeedsGuards``), ``run(True)``:
    a launch records with a value graph only when it needs one (ADR-0840). ``run`` starts
    afresh each time (its own op log)."""
    try:
        return run(False)
    except NeedsGuards:
        return run(True)


def run_programs(case: Case, hw: HwConfig, writer: OpWriter,
                 tensors: dict[str, HbmTensor], k: int = 1,
                 alone: bool = False, guards: bool = False,
                 on_programs: Callable[[int, int], Any] | None = None) -> list[int]:
    """Phase 1 proper: one SimPy environment, one driver per PE, one greenlet per program,
    ``k`` resident programs per PE. ``alone``: program 0 only, without an IPCQ ring (the
    occupancy dry run, record/machine/resident.py). A launch beyond ``KERNBENCH_MAX_OPS`` is
    refused (``record/lowering/bounds.py``; program 0 alone projects the whole grid).
    Hardware with a shared part is timed by the chip (``record/machine/chip``), anything
    else PE by PE in closed form. The scratch peak of each PE. ``guards``: keep the value
    graph decisions on data evaluate (else a decision raises ``NeedsGuards``)."""
    fn = case.kernel.fn if isinstance(case.kernel, Kernel) else case.kernel
    ptrs = [Pointer(t) for t in tensors.values()]
    params = dict(case.params)
    grid = tuple(int(g) for g in case.grid)
    total = check_grid(grid)

    def program() -> None:
        fn(*ptrs, **params)

    # program 0's op count projects the launch only when it runs one program per PE at a
    # time (k = 1): resident programs share the PE's seq
    bound = OpBound(total, writer.progress, project=k == 1, on_programs=on_programs)
    run = counted(program, bound)
    writer.progress = bound.progress
    n_programs = 1 if alone else total
    shadow_ = shadow(case, tensors, writer) if guards else None
    return run_launch(hw, writer, grid, run, k, n_programs, alone, shadow_)


def _peak_alone(case: Case, hw: HwConfig, path: Path, tensors: dict[str, HbmTensor],
                guards: bool) -> int:
    """Program 0's kernel-scratch peak, recorded alone into a throwaway op log."""
    writer = OpWriter(path, stream=False)
    try:
        peaks = run_programs(case, hw, writer, tensors, alone=True, guards=guards)
    finally:
        writer.abort()
    return peaks[0]


def record(case: Case, out: str | Path, hw: HwConfig | str | Path | None = None,
           progress: Callable[[int], Any] | None = None,
           programs: Callable[[int, int], Any] | None = None) -> Trace:
    """Phase 1: record ``case`` on ``hw`` into the trace directory ``out``. ``progress`` is
    called with the number of ops recorded so far, every batch of rows; ``programs`` with
    the programs finished so far and the grid's, every ``PROGRAM_TICK`` programs.

    ``out`` is replaced atomically under a lock (``kernbench.trace.atomic``). The returned Trace
    is the one this call wrote, even if a concurrent record to ``out`` swaps in later."""
    hw = load_hw(hw)
    _check_params(case)
    tensors = layout(case)
    out = Path(out)
    outside_traces(out)
    pending = case.tensors if isinstance(case.tensors, StoredRoles) else None
    with atomic_dir(out) as tmp:

        def attempt(guards: bool) -> tuple[OpWriter, list[int], int]:
            for leftover in ("ops.parquet", "access.parquet"):  # of a run without guards
                (tmp / leftover).unlink(missing_ok=True)
            if pending is not None:
                pending.begin()  # its roles are the stores this recording sees
            k = occupancy(hw, math.prod(int(g) for g in case.grid),
                          lambda alone, path: _peak_alone(case, alone, path, tensors, guards))
            while True:
                writer = OpWriter(tmp / "ops.parquet", progress=progress)
                try:
                    peaks = run_programs(case, hw, writer, tensors, k, guards=guards,
                                         on_programs=programs)
                    writer.close()
                    if pending is not None:
                        pending.settle()
                except ScratchOverflowError:
                    writer.abort()
                    if k == 1 or not guards:  # without decisions every program is program 0
                        raise
                    # a program took a path needing more scratch than program 0's (a
                    # decision on data): fewer resident programs, larger slots (ADR-0840)
                    k //= 2
                    (tmp / "access.parquet").unlink(missing_ok=True)
                    continue
                except BaseException:
                    writer.abort()
                    raise
                return writer, peaks, k

        writer, peaks, k = guarded(attempt)
        write_tensors(tmp / "tensors.parquet", case, tensors)
        kernel = case.kernel.name if isinstance(case.kernel, Kernel) else (
            f"{case.kernel.__module__}:{case.kernel.__qualname__}")
        manifest: dict[str, Any] = {
            "format": "kernbench-trace",
            "schema_version": writer.schema_version,
            "kernbench_version": __version__,
            "case": case.name,
            "case_params": dict(case.case_params) if case.case_params is not None else None,
            "factory": case.factory, "builtin": case.builtin,  # as data; replay never imports it
            "kernel": kernel,
            "params": dict(case.params),
            "grid": list(case.grid),
            "hw": hw.to_dict(),
            "n_ops": writer.n_ops,
            "t_end_ps": writer.t_end_ps,
            "scratch_peak_bytes": max(peaks),
            "programs_per_pe": k,
            "files": {n: file_sha256(tmp / n) for n in DATA_FILES + OPTIONAL_FILES
                      if n in DATA_FILES or (tmp / n).is_file()},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return Trace(out, manifest)
