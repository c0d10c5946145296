"""One replay, in this process: open the trace, run it, compare, write ``replay/`` atomically.

Reads only the trace directory; never modifies ``ops.parquet`` or ``tensors.parquet``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.case import init_from_json
from kernbench.errors import BadInputError, ReplayError, TraceFormatError
from kernbench.replay.decode import decode
from kernbench.replay.engine import RunOutcome, execute
from kernbench.replay.store import NP_DTYPES, MemoryStore
from kernbench.replay.values import ValueLog, values_table
from kernbench.replay.verdict import check_outputs, expected_outputs, resolve_reference
from kernbench.schemas.arrow import OUTPUTS, read_table
from kernbench.schemas.dtypes import DTYPES
from kernbench.trace import Trace, atomic_dir

OUTPUT_ROLES = frozenset({"output", "inout"})
INPUT_ROLES = frozenset({"input", "inout"})


@dataclass(frozen=True)
class ReplayResult:
    """What a replay found. ``verdict`` is the parsed ``replay/verdict.json``."""

    ok: bool
    outputs: dict[str, np.ndarray]
    max_abs_err: dict[str, float]
    verdict: dict[str, Any]
    path: Path | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        from kernbench.notebook import replay_repr

        return replay_repr(self)

    def _repr_html_(self) -> str:
        from kernbench.notebook import replay_html

        return replay_html(self)


@dataclass(frozen=True)
class HbmTensor:
    name: str
    role: str
    pe: int
    addr: int
    dtype: str
    shape: tuple[int, ...]
    initial: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.initial.nbytes)


def load_tensors(table: pa.Table) -> list[HbmTensor]:
    """The HBM tensors with their initial contents (TraceFormatError if unusable)."""
    out = []
    for row in table.to_pylist():
        where = f"tensors.parquet: tensor {row.get('name')!r}"
        dt = DTYPES.get(row["dtype"])
        shape = tuple(int(s) for s in row["shape"] or ())
        if dt is None or not shape or any(s <= 0 for s in shape) or row["addr"] < 0:
            raise TraceFormatError(f"{where}: bad dtype/shape/addr {row['dtype']!r} "
                                   f"{list(shape)} {row['addr']}")
        try:
            init = init_from_json(row["init"], row["data"], shape=shape, dtype=dt)
            arr = np.ascontiguousarray(init.make(shape, dt))
        except (BadInputError, ValueError, TypeError, KeyError) as exc:
            raise TraceFormatError(f"{where}: unusable init {row['init']!r} ({exc})") from None
        out.append(HbmTensor(row["name"], row["role"], int(row["pe"]), int(row["addr"]),
                             row["dtype"], shape, arr))
    return out


def build_store(manifest: dict[str, Any], tensors: list[HbmTensor]) -> MemoryStore:
    hw = manifest.get("hw")
    if not isinstance(hw, dict):
        raise TraceFormatError("manifest has no hw config")
    regions = sorted((t.addr, t.addr + t.nbytes, t.name) for t in tensors)
    for (_, hi, a), (lo, _, b) in zip(regions, regions[1:], strict=False):
        if lo < hi:
            raise TraceFormatError(f"tensors.parquet: tensors {a!r} and {b!r} overlap in HBM")
    store = MemoryStore(hw, regions)
    for t in tensors:
        try:
            store.fill("hbm", t.pe, t.addr, t.initial.view(np.uint8).reshape(-1).data)
        except (KeyError, ValueError) as exc:
            raise TraceFormatError(f"tensors.parquet: tensor {t.name!r}: {exc.args[0]}") from None
    return store


def final_outputs(store: MemoryStore, tensors: list[HbmTensor]) -> dict[str, np.ndarray]:
    out = {}
    for t in tensors:
        if t.role in OUTPUT_ROLES:
            raw = store.read_bytes("hbm", t.pe, t.addr, t.addr + t.nbytes)
            out[t.name] = np.frombuffer(raw, dtype=NP_DTYPES[t.dtype]).reshape(t.shape).copy()
    return out


def _error_info(program: Any, outcome: RunOutcome) -> dict[str, Any] | None:
    if outcome.error is None:
        return None
    row = outcome.error_row
    return {"op_id": int(program.op_id[row]), "name": program.name(row).value,
            "src": program.src(row), "message": str(outcome.error)}


def _nonfinite_info(program: Any, row: int | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"op_id": int(program.op_id[row]), "name": program.name(row).value,
            "src": program.src(row)}


def replay_in_process(path: str | Path, case: str | Callable[..., Any] | None = None,
                      run_id: str | None = None, case_paths: Sequence[str] = ()
                      ) -> ReplayResult:
    """Replay the trace at ``path`` here; raises TraceFormatError/BadInputError on bad input.

    ``run_id`` (fresh if None) is written into the verdict, so whoever started this replay
    can tell its verdict from an older one; ``case_paths`` locate a ``--case`` module.
    """
    path = Path(path)
    run_id = run_id or new_run_id()
    started = time.perf_counter()
    trace = Trace.open(path)
    manifest = trace.manifest
    tensors = load_tensors(trace.tensors_table)
    rows = trace.tensors_table.select(["name", "shape", "dtype", "role", "init"]).to_pylist()
    reference = resolve_reference(manifest, case, rows, case_paths)
    store = build_store(manifest, tensors)
    program = decode(trace.ops_table, store)
    values = ValueLog()
    outcome = execute(program, values)
    table, first_nonfinite = values_table(program, values, program.order)
    outputs = final_outputs(store, tensors)
    verdict: dict[str, Any] = {
        "ok": False, "run_id": run_id, "reference": reference.label if reference.fn else None,
        "reference_note": reference.note, "n_ops": len(program),
        "n_executed": outcome.executed, "outputs": {}, "error": None,
        "invalid_read": _error_info(program, outcome),
        "first_nonfinite": _nonfinite_info(program, first_nonfinite),
    }
    if reference.fn is not None:
        inputs = {t.name: t.initial for t in tensors if t.role in INPUT_ROLES}
        try:
            expected = expected_outputs(reference, inputs)
            report, verdict["error"] = check_outputs(
                outputs, {t.name: t.dtype for t in tensors}, expected)
            verdict["outputs"] = report
        except ValueError as exc:
            verdict["error"] = str(exc)
    else:
        verdict["outputs"] = {name: {"checked": False, "ok": True} for name in outputs}
    verdict["ok"] = (verdict["invalid_read"] is None and verdict["error"] is None
                     and all(o["ok"] for o in verdict["outputs"].values()))
    verdict["replay_s"] = round(time.perf_counter() - started, 6)
    write_replay_dir(path, table, outputs, tensors, verdict)
    return ReplayResult(verdict["ok"], outputs, _abs_errors(verdict), verdict, path)


def _abs_errors(verdict: dict[str, Any]) -> dict[str, float]:
    return {name: o["max_abs_err"] for name, o in verdict["outputs"].items()
            if o.get("checked") and o.get("max_abs_err") is not None}


def outputs_table(outputs: dict[str, np.ndarray], tensors: list[HbmTensor]) -> pa.Table:
    dtypes = {t.name: t.dtype for t in tensors}
    names = list(outputs)
    return pa.Table.from_arrays([
        pa.array(names, pa.string()), pa.array([dtypes[n] for n in names], pa.string()),
        pa.array([list(outputs[n].shape) for n in names], pa.list_(pa.int64())),
        pa.array([outputs[n].tobytes() for n in names], pa.binary()),
    ], schema=OUTPUTS)


def write_replay_dir(path: Path, values_table: pa.Table, outputs: dict[str, np.ndarray],
                     tensors: list[HbmTensor], verdict: dict[str, Any]) -> None:
    """Write ``path/replay/`` under a temporary name and rename it into place."""
    final = path / "replay"
    try:
        with atomic_dir(final, replaceable=lambda _: True) as tmp:
            pq.write_table(values_table, tmp / "values.parquet", compression="zstd",
                           compression_level=1)
            pq.write_table(outputs_table(outputs, tensors), tmp / "outputs.parquet",
                           compression="zstd", compression_level=1)
            (tmp / "verdict.json").write_text(json.dumps(verdict, indent=2, sort_keys=True)
                                              + "\n")
    except OSError as exc:
        raise BadInputError(f"cannot write {final}: {exc.strerror or exc}") from None


def new_run_id() -> str:
    return uuid.uuid4().hex


def load_result(path: str | Path, run_id: str | None = None) -> ReplayResult:
    """The ReplayResult of a replay already written to ``path/replay/``; with ``run_id``,
    only that run's (ReplayError if ``replay/`` holds no verdict of that run)."""
    rdir = Path(path) / "replay"
    vpath = rdir / "verdict.json"
    try:
        verdict = json.loads(vpath.read_text())
    except FileNotFoundError:
        if run_id is not None:
            raise ReplayError(f"the replay process wrote no verdict ({vpath} is missing)"
                              ) from None
        raise TraceFormatError(f"{path} has not been replayed ({vpath} is missing)") from None
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{vpath}: unreadable ({exc})") from None
    if not isinstance(verdict, dict):
        raise TraceFormatError(f"{vpath}: not a verdict object")
    if run_id is not None and verdict.get("run_id") != run_id:
        raise ReplayError(f"the replay process wrote no verdict of this run ({vpath} is "
                          "from an earlier replay; not reporting it)")
    table = read_table(rdir / "outputs.parquet", "kernbench-outputs")
    outputs = {}
    for row in table.to_pylist():
        arr = np.frombuffer(row["data"], dtype=NP_DTYPES[row["dtype"]])
        outputs[row["name"]] = arr.reshape(tuple(row["shape"])).copy()
    return ReplayResult(bool(verdict.get("ok")), outputs, _abs_errors(verdict), verdict,
                        Path(path))
