"""One replay, in this process: open the trace, run it, compare, write ``replay/`` atomically.

Reads only the trace directory; never modifies ``ops.parquet`` or ``tensors.parquet``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.case import Init, init_from_json
from kernbench.case.recorded import replaying_roles
from kernbench.errors import BadInputError, TraceFormatError
from kernbench.replay import pipeline
from kernbench.replay.inputs import make_initial
from kernbench.replay.progress import Progress
from kernbench.replay.reader import BATCH_ROWS
from kernbench.replay.result import (
    Outputs,
    ReplayResult,
    abs_errors,
    load_verdict,
    new_run_id,
)
from kernbench.replay.store import NP_DTYPES, MemoryStore
from kernbench.replay.threads import blas_threads
from kernbench.replay.values import ValueLog
from kernbench.replay.verdict import (
    check_outputs,
    expected_outputs,
    reference_inputs,
    resolve_reference,
)
from kernbench.schemas.arrow import OUTPUTS, VALUES
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.replay_status import VERIFIED, verdict_status
from kernbench.trace import Trace, atomic_dir, writing
from kernbench.trace.directory import read_manifest, verify_files
from kernbench.trace.parquet import read_table
from kernbench.trace.replayed import FILES_KEY, replayed_files, stale_reason

OUTPUT_ROLES = frozenset({"output", "inout"})
INPUT_ROLES = frozenset({"input", "inout"})


@dataclass(frozen=True)
class HbmTensor:
    name: str
    role: str
    pe: int
    addr: int
    dtype: str
    shape: tuple[int, ...]
    #: how its initial contents are made (generated straight into the store's memory)
    init: Init

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * NP_DTYPES[self.dtype].itemsize


def load_tensors(table: pa.Table) -> list[HbmTensor]:
    """The HBM tensors and their inits (TraceFormatError if unusable); nothing is generated
    before ``build_store`` puts it in place."""
    out = []
    rows = table.drop_columns(["data"]).to_pylist()
    for row, contents in zip(rows, _contents(table.column("data")), strict=True):
        row["data"] = contents
        where = f"tensors.parquet: tensor {row.get('name')!r}"
        dt = DTYPES.get(row["dtype"])
        shape = tuple(int(s) for s in row["shape"] or ())
        if dt is None or not shape or any(s <= 0 for s in shape) or row["addr"] < 0:
            raise TraceFormatError(f"{where}: bad dtype/shape/addr {row['dtype']!r} "
                                   f"{list(shape)} {row['addr']}")
        try:
            init = init_from_json(row["init"], row["data"], shape=shape, dtype=dt)
        except (BadInputError, ValueError, TypeError, KeyError) as exc:
            raise TraceFormatError(f"{where}: unusable init {row['init']!r} ({exc})") from None
        out.append(HbmTensor(row["name"], row["role"], int(row["pe"]), int(row["addr"]),
                             row["dtype"], shape, init))
    return out


def _contents(column: pa.ChunkedArray) -> list[memoryview | None]:
    """Each row's bytes as a view of the Arrow buffer that holds them: a 134 MB input is not
    copied into a bytes object (an Arrow scalar, or ``to_pylist``, copies it)."""
    if not pa.types.is_binary(column.type):  # another layout (a large or view binary)
        return [None if v is None else memoryview(v) for v in column.to_pylist()]
    out: list[memoryview | None] = []
    for chunk in column.chunks:
        validity, offsets, values = chunk.buffers()
        n, start = len(chunk), chunk.offset
        offs = np.frombuffer(offsets, np.int32, n + 1, start * 4).tolist()
        valid = [True] * n if chunk.null_count == 0 else np.unpackbits(
            np.frombuffer(validity, np.uint8), bitorder="little")[start:start + n].tolist()
        held = memoryview(values) if values is not None else memoryview(b"")
        out += [held[offs[i]:offs[i + 1]] if ok else None for i, ok in enumerate(valid)]
    return out


def build_store(manifest: dict[str, Any], tensors: list[HbmTensor],
                keep: frozenset[str] | set[str] = frozenset(),
                ipcq_bytes: dict[int, int] | None = None
                ) -> tuple[MemoryStore, dict[str, np.ndarray]]:
    """The memories with every HBM tensor's initial contents generated in place (inputs are
    generated once per replay), and copies of the tensors named in ``keep`` as they were
    before the run (the reference's inputs; bfloat16 as uint16 bits). ``ipcq_bytes``: the
    message slots each PE's messages span (the validator's)."""
    hw = manifest.get("hw")
    if not isinstance(hw, dict):
        raise TraceFormatError("manifest has no hw config")
    regions = sorted((t.addr, t.addr + t.nbytes, t.name) for t in tensors)
    for (_, hi, a), (lo, _, b) in zip(regions, regions[1:], strict=False):
        if lo < hi:
            raise TraceFormatError(f"tensors.parquet: tensors {a!r} and {b!r} overlap in HBM")
    store = MemoryStore(hw, regions, ipcq_bytes=ipcq_bytes)
    kept: dict[str, np.ndarray] = {}
    for t in tensors:
        where = f"tensors.parquet: tensor {t.name!r}"
        try:
            mem = store.memory("hbm", t.pe)
        except (KeyError, ValueError) as exc:
            raise TraceFormatError(f"{where}: {exc.args[0]}") from None
        if t.addr + t.nbytes > mem.size:  # pragma: no cover - regions size the memory
            raise TraceFormatError(f"{where}: outside HBM")
        npd = NP_DTYPES[t.dtype]
        view = np.frombuffer(mem.buf, npd, t.nbytes // npd.itemsize, t.addr).reshape(t.shape)
        try:  # HBM is never read-checked: its bytes are valid from the start
            make_initial(t.init, view, DTYPES[t.dtype])
        except (BadInputError, ValueError, TypeError, KeyError) as exc:
            raise TraceFormatError(f"{where}: unusable init {t.init.to_json()!r} ({exc})"
                                   ) from None
        if t.name in keep:
            kept[t.name] = view.copy()
    return store, kept


def final_outputs(store: MemoryStore, tensors: list[HbmTensor]) -> dict[str, np.ndarray]:
    out = {}
    for t in tensors:
        if t.role in OUTPUT_ROLES:
            npd = NP_DTYPES[t.dtype]
            view = np.frombuffer(store.memory("hbm", t.pe).buf, dtype=npd,
                                 count=t.nbytes // npd.itemsize, offset=t.addr)
            out[t.name] = view.reshape(t.shape).copy()
    return out


def replay_in_process(path: str | Path | Trace, case: str | Callable[..., Any] | None = None,
                      run_id: str | None = None, case_paths: Sequence[str] = (),
                      threads: int | None = None, reference: bool = True,
                      window_rows: int = BATCH_ROWS, progress: bool | None = None
                      ) -> ReplayResult:
    """Replay the trace at ``path`` (or the ``Trace`` already opened) here; raises
    TraceFormatError/BadInputError on bad input. The trace is opened once: the pipeline
    reads its rows through the opened ``Trace``, never from a path.

    ``run_id`` (fresh if None) is written into the verdict, so whoever started this replay
    can tell its verdict from an older one; ``case_paths`` locate a ``--case`` module.
    ``threads``: BLAS threads while replaying (default ``KERNBENCH_REPLAY_THREADS`` or 1).
    ``reference`` False: do not compute the reference (benchmarks). ``progress``: show
    progress (None: on a terminal only)."""
    with blas_threads(threads):
        started = time.perf_counter()
        trace = path if isinstance(path, Trace) else Trace.open(path)
        return _replay(trace, case, run_id or new_run_id(), case_paths, reference,
                       window_rows, progress, started)


def _replay(trace: Trace, case: str | Callable[..., Any] | None, run_id: str,
            case_paths: Sequence[str], with_reference: bool, window_rows: int,
            progress: bool | None, started: float) -> ReplayResult:
    path = trace.path
    manifest = trace.manifest
    tensors = load_tensors(trace.tensors_table)
    rows = trace.tensors_table.select(["name", "shape", "dtype", "role", "init"]).to_pylist()
    with replaying_roles({str(r["name"]): str(r["role"]) for r in rows}):  # never re-record
        reference = (resolve_reference(manifest, case, rows, case_paths) if with_reference
                     else None)
    needed = {t.name for t in tensors if t.role in INPUT_ROLES} if (
        reference is not None and reference.fn is not None) else set()
    # the reference's inputs are the only copies kept apart from the store
    store, inputs = build_store(manifest, tensors, needed,
                                trace.validated().validation.ipcq_bytes)
    final = path / "replay"
    try:
        with atomic_dir(final, replaceable=lambda _: True) as tmp:
            writer = writing.open_writer(tmp / "values.parquet", VALUES, "values")
            bar = Progress(trace.n_ops, enabled=progress)
            try:
                values = ValueLog(sink=writer.write_batch)
                outcome = pipeline.run(trace, store, values, window_rows, bar)
                values.close()
            finally:
                bar.close()
                writer.close()
            outputs = final_outputs(store, tensors)
            values.release()
            del store  # the memories go before the reference runs
            verdict = _verdict(outcome, values, reference, outputs, tensors, inputs, run_id)
            verdict["replay_s"] = round(time.perf_counter() - started, 6)
            verdict[FILES_KEY] = replayed_files(manifest)  # what was replayed (ADR-0538)
            writing.write_table(outputs_table(outputs, tensors), tmp / "outputs.parquet",
                                "outputs")
            (tmp / "verdict.json").write_text(json.dumps(verdict, indent=2, sort_keys=True)
                                              + "\n")
    except OSError as exc:
        raise BadInputError(f"cannot write {final}: {exc.strerror or exc}") from None
    return ReplayResult(Outputs(outputs, {t.name: t.dtype for t in tensors}),
                        abs_errors(verdict), verdict, path)


def _verdict(outcome: pipeline.Outcome, values: ValueLog, reference: Any,
             outputs: dict[str, np.ndarray], tensors: list[HbmTensor],
             inputs: dict[str, np.ndarray], run_id: str) -> dict[str, Any]:
    """The verdict; ``inputs`` is emptied once the reference has used them."""
    first = values.first_nonfinite[2] if values.first_nonfinite is not None else None
    verdict: dict[str, Any] = {
        "ok": False, "run_id": run_id,
        "reference": reference.label if reference and reference.fn else None,
        "reference_note": reference.note if reference else "reference not computed",
        "n_ops": outcome.n_ops, "n_executed": outcome.executed, "outputs": {},
        "error": None, "invalid_read": outcome.error, "first_nonfinite": first,
    }
    if reference is not None and reference.fn is not None:
        try:
            dtypes = {t.name: t.dtype for t in tensors}
            expected = expected_outputs(reference, reference_inputs(reference, inputs, dtypes),
                                        copy=False)
            inputs.clear()
            report, verdict["error"] = check_outputs(
                outputs, {t.name: t.dtype for t in tensors}, expected)
            verdict["outputs"] = report
        except ValueError as exc:
            verdict["error"] = str(exc)
    else:
        verdict["outputs"] = {name: {"checked": False, "ok": True} for name in outputs}
    verdict["status"] = verdict_status(verdict)
    verdict["ok"] = verdict["status"] == VERIFIED  # the outputs match the reference (ADR-0830)
    return verdict


def outputs_table(outputs: dict[str, np.ndarray], tensors: list[HbmTensor]) -> pa.Table:
    dtypes = {t.name: t.dtype for t in tensors}
    names = list(outputs)
    return pa.Table.from_arrays([
        pa.array(names, pa.string()), pa.array([dtypes[n] for n in names], pa.string()),
        pa.array([list(outputs[n].shape) for n in names], pa.list_(pa.int64())),
        pa.array([outputs[n].tobytes() for n in names], pa.binary()),
    ], schema=OUTPUTS)


def load_result(path: str | Path, run_id: str | None = None) -> ReplayResult:
    """The ReplayResult of a replay already written to ``path/replay/``; with ``run_id``,
    only that run's (ReplayError if ``replay/`` holds no verdict of that run). A replay of
    other contents than the trace's (edited since) is refused (TraceFormatError)."""
    verdict = load_verdict(path, run_id)
    manifest = read_manifest(Path(path))
    if run_id is None:  # a result read back later: the data files are the manifest's
        verify_files(Path(path), manifest)
    reason = stale_reason(verdict, manifest)
    if reason is not None:
        raise TraceFormatError(f"{Path(path) / 'replay'}: not this trace's replay: {reason}")
    table = read_table(Path(path) / "replay" / "outputs.parquet", "kernbench-outputs")
    raw, dtypes = {}, {}
    for row in table.to_pylist():
        arr = np.frombuffer(row["data"], dtype=NP_DTYPES[row["dtype"]])
        raw[row["name"]] = arr.reshape(tuple(row["shape"])).copy()
        dtypes[row["name"]] = row["dtype"]
    return ReplayResult(Outputs(raw, dtypes), abs_errors(verdict), verdict, Path(path))
