"""``kb.retime``: a trace's op stream timed again on other hardware.

No kernel, source or case runs: each program's recorded stream (``script.py``) is issued
on the same machine ``kb.record`` uses (``record/machine/runner.py``), with the same
occupancy dry run and resident slots, so the op log is byte for byte what recording the
case on that hardware writes, wherever the stream does not depend on the hardware; where
it does, ``checks.py`` and the machine refuse in one line (``RetimeError``) and nothing is
written.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernbench import __version__
from kernbench.errors import RetimeError, ScratchOverflowError
from kernbench.record.machine.context import current
from kernbench.record.machine.resident import occupancy
from kernbench.record.machine.runner import run_launch
from kernbench.record.retime.checks import check, guard_shadow
from kernbench.record.retime.player import Shared, play
from kernbench.record.retime.script import Script, read_rows, scripts
from kernbench.record.retime.work import Works
from kernbench.record.rows.writer import OpWriter
from kernbench.schemas.arrow import version_parts
from kernbench.trace import DATA_FILES, OPTIONAL_FILES, Trace, file_sha256
from kernbench.trace.atomic import atomic_dir, outside_traces
from kernbench.trace.hw import HwConfig, load_hw
from kernbench.trace.op_stream import read_stream


def retime(trace: Trace | str | Path, hw: HwConfig | str | Path, out: str | Path,
           progress: Callable[[int], Any] | None = None, origin: str | None = None) -> Trace:
    """Time ``trace``'s op stream on ``hw`` into the trace directory ``out`` (replaced
    atomically). ``RetimeError`` (and nothing written) where the stream depends on the
    hardware; ``progress`` is called with the ops timed so far, every batch of rows;
    ``origin`` names the source in the manifest (default: its absolute path)."""
    src = trace if isinstance(trace, Trace) else Trace.open(trace)
    new = load_hw(hw)
    old = HwConfig.from_dict(src.manifest["hw"])
    events = read_stream(src.path, src.manifest)
    if events is None:
        raise RetimeError(f"{src.path}: the trace holds no op stream (stream.parquet: it was "
                          "recorded before kernbench could retime, or retimed from such a "
                          "trace); record it again")
    n_programs = math.prod(int(g) for g in src.manifest["grid"])
    plan = scripts(read_rows(src.ops_table), events, n_programs)
    guards = check(src, plan, old, new, n_programs)
    out = Path(out)
    outside_traces(out)
    made = next((p for p in reversed(out.absolute().parents) if not p.exists()), None)
    try:
        with atomic_dir(out) as tmp:
            writer, peaks, k = _run(src, plan, old, new, tmp, guards, progress)
            shutil.copyfile(src.path / "tensors.parquet", tmp / "tensors.parquet")
            manifest = _manifest(src, new, writer, peaks, k, tmp,
                                 origin or str(src.path.absolute()))
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2,
                                                          sort_keys=True) + "\n")
    except BaseException:
        if made is not None:  # a refusal leaves nothing behind, not even folders made for it
            shutil.rmtree(made, ignore_errors=True)
        raise
    return Trace(out, manifest)


def _run(src: Trace, plan: list[Script], old: HwConfig, new: HwConfig, tmp: Path,
         guards: bool, progress: Callable[[int], Any] | None
         ) -> tuple[OpWriter, list[int], int]:
    """Issue every program's stream on ``new``: (the op log written, peaks, k)."""
    grid = tuple(int(g) for g in src.manifest["grid"])
    n_programs = len(plan)
    major = version_parts(src.manifest["schema_version"])[0]

    shared: list[Shared] = []  # the running launch's

    def body() -> None:
        ctx = current()
        play(ctx, plan[ctx.program], shared[-1])

    def launch(writer: OpWriter, hw: HwConfig, k: int, n: int, alone: bool) -> list[int]:
        shared.append(Shared(src.access, Works(old, new, src.access)))
        shadow = guard_shadow(src, writer) if guards else None
        return run_launch(hw, writer, grid, body, k, n, alone, shadow)

    def alone(hw: HwConfig, path: Path) -> int:
        writer = OpWriter(path, stream=False)
        try:
            return launch(writer, hw, 1, 1, True)[0]
        finally:
            writer.abort()

    k = occupancy(new, n_programs, alone)
    while True:
        writer = OpWriter(tmp / "ops.parquet", progress=progress)
        writer.indexed = major == 2
        try:
            peaks = launch(writer, new, k, n_programs, False)
            writer.close()
            return writer, peaks, k
        except ScratchOverflowError as exc:
            writer.abort()
            if k > 1 and guards:  # as kb.record: a path on data needs a larger slot
                k //= 2
                (tmp / "access.parquet").unlink(missing_ok=True)
                continue
            raise RetimeError(f"program no longer fits its TCM slot on {new.name}: "
                              f"{str(exc).splitlines()[0]}") from None
        except BaseException:
            writer.abort()
            raise


def _manifest(src: Trace, hw: HwConfig, writer: OpWriter, peaks: list[int], k: int,
              tmp: Path, origin: str) -> dict[str, Any]:
    """The manifest ``kb.record`` writes on ``hw``, naming the trace it was retimed from."""
    manifest = dict(src.manifest)
    manifest.pop("retimed_from", None)
    manifest.update({
        "schema_version": writer.schema_version,
        "kernbench_version": __version__,
        "hw": hw.to_dict(),
        "n_ops": writer.n_ops,
        "t_end_ps": writer.t_end_ps,
        "scratch_peak_bytes": max(peaks),
        "programs_per_pe": k,
        "files": {n: file_sha256(tmp / n) for n in DATA_FILES + OPTIONAL_FILES
                  if n in DATA_FILES or (tmp / n).is_file()},
        "retimed_from": {"trace": origin, "hw": str(src.manifest["hw"]["name"]),
                         "t_end_ps": int(src.manifest["t_end_ps"]),
                         "ops_sha256": str(src.manifest["files"]["ops.parquet"])},
    })
    return manifest
