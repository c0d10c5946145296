"""The one validator of a trace against its Arrow schemas and docs/trace-format.md (ADR-0120).

Two levels:

* **unreadable** (``TraceFormatError``, exit 2 everywhere): a manifest field of the wrong
  type, absurd hardware, a Parquet file that does not parse, wrong schema metadata, a missing
  column or one of the wrong type, ``n_ops`` not the row count, a size over the limit
  (``kernbench.trace.limits``). All of it is decided from the manifest and the Parquet footers,
  before any data is allocated.
* **invalid** (a ``Validation`` of findings): rows that break the format contract — nulls,
  unknown op names/kinds/engines, unparseable attrs, negative or absurd values, non-dense
  ``op_id``, bad tensor rows. ``check`` lists them (exit 1); every other command refuses
  the trace (exit 2). Timing findings (``time_order``, ``hbm_bounds``, ``seq`` density) fail
  ``check`` only: replay runs such a trace and shows the damage (ADR-0120).

The op log is read in record batches (bounded memory) and checked with numpy over its
Arrow buffers: no polars and no ``pyarrow.compute``, so the replay child imports neither
(ADR-0630). Nothing is evaluated or unpickled: metadata and attrs are parsed as JSON only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.errors import BadInputError, TraceFormatError
from kernbench.schemas.arrow import SCHEMAS, version_parts
from kernbench.schemas.elements import EMPTY, AccessTable
from kernbench.trace import limits
from kernbench.trace.contention import read_shared
from kernbench.trace.element_checks import access_table, max_access_rows
from kernbench.trace.findings import Finding, Findings
from kernbench.trace.hw import HwConfig
from kernbench.trace.ipcq_slots import IpcqUse, directions_bytes
from kernbench.trace.parquet import batches, open_parquet, read
from kernbench.trace.rows import MAX_VALUE, ops_findings, tensor_findings

if TYPE_CHECKING:
    import polars as pl

#: the rules a finding belongs to; those sharing a name with a ``check`` invariant are shown
#: under it (``schema``, ``dense_ids``, ``time_order``)
RULES = ("schema", "dense_ids", "dense_seq", "time_order", "tensors", "hbm_bounds")
#: the ``check`` invariant a rule's findings are listed under, where it is not its own name
SHOWN_AS = {"dense_seq": "dense_ids"}
#: rules whose findings make a trace invalid (refused by every command but ``check``).
#: ``time_order`` and ``hbm_bounds`` describe what the timing model or the kernel did, not
#: the format: ``check`` fails on them, while replay runs such a trace and shows the
#: consequence as wrong data or an invalid read (replay is time-faithful), and
#: report/export can show it.
#: ``dense_seq`` (seq dense per PE) is bookkeeping nothing but ``diff`` relies on.
REFUSING = frozenset(RULES) - {"time_order", "hbm_bounds", "dense_seq"}
#: findings kept per rule (the count is exact)
KEEP = 1000
BATCH_ROWS = 1 << 16  # rows per batch: memory bounded by the batch, not the op log
#: manifest fields: (key, accepted types, required)
MANIFEST_FIELDS: tuple[tuple[str, tuple[type, ...], bool], ...] = (
    ("format", (str,), True), ("schema_version", (int, str), True), ("case", (str,), True),
    ("kernel", (str,), True), ("grid", (list,), True), ("hw", (dict,), True),
    ("n_ops", (int,), True), ("t_end_ps", (int,), True), ("files", (dict,), True),
    ("params", (dict,), False), ("case_params", (dict,), False),
    ("scratch_peak_bytes", (int,), False), ("kernbench_version", (str,), False),
    ("retimed_from", (dict,), False),
)
#: a retimed trace's ``retimed_from``: the trace it was retimed from, that
#: trace's hardware (its preset name), latency and op log's sha256
RETIMED_FROM = {"trace": str, "hw": str, "t_end_ps": int, "ops_sha256": str}


#: an ops.parquet of at most this many rows keeps its decoded rows in the Validation
SMALL_OPS_ROWS = 1 << 17


@dataclass(frozen=True)
class Validation:
    """What the row rules found: exact counts per rule, the first ``KEEP`` findings each."""

    counts: dict[str, int]
    #: the kept findings ``(rule, op_id, other_op_id, message)``, in the order found
    findings: tuple[Finding, ...]
    #: the rows of a small ops.parquet (at most ``SMALL_OPS_ROWS``), decoded once as stored:
    #: replay reads them from here instead of decoding the file again
    ops: pa.Table | None = None
    #: tensors.parquet as the validator read it (whole, ``kb.data`` contents included)
    tensors: pa.Table | None = None
    #: ops.parquet as the validator opened it (footer checked): replay streams from this
    #: handle, so a replay opens the file once
    ops_file: pq.ParquetFile | None = None
    #: the arrays of access.parquet as the validator read them (EMPTY when there is none)
    access: AccessTable = EMPTY
    #: pe -> the end of the highest ipcq byte its operands use (``trace/ipcq_slots.py``): replay
    #: sizes each PE's message slots by it
    ipcq_bytes: dict[int, int] = field(default_factory=dict)
    #: shared.parquet as the validator read and checked it (None when there is none)
    shared: pa.Table | None = None

    @property
    def ok(self) -> bool:
        """The rows follow the format (no finding of a refusing rule)."""
        return not any(n for r, n in self.counts.items() if r in REFUSING)

    def rule(self, name: str) -> pl.DataFrame:
        """The kept findings listed under check invariant ``name`` (``op_id``,
        ``other_op_id``, ``message``), as a polars frame for ``check``."""
        import polars as pl

        rows = [f[1:] for f in self.findings if SHOWN_AS.get(f[0], f[0]) == name]
        return pl.DataFrame(rows, schema={"op_id": pl.Int64, "other_op_id": pl.Int64,
                                          "message": pl.String}, orient="row")

    def count(self, name: str) -> int:
        """How many findings check invariant ``name`` has (exact)."""
        return sum(n for r, n in self.counts.items() if SHOWN_AS.get(r, r) == name)

    def summary(self, where: str) -> str:
        """One line for the commands that refuse an invalid trace."""
        total = sum(n for r, n in self.counts.items() if r in REFUSING)
        first = next((f[3] for f in self.findings if f[0] in REFUSING), "")
        return (f"{where}: invalid trace ({total} violation{'s' if total != 1 else ''}; first: "
                f"{first}); `kernbench check` lists them")


def read_access(path: Path, manifest: dict[str, Any]) -> AccessTable:
    """``access.parquet`` of a trace (EMPTY when the manifest lists none), its footer and
    size checked like every data file's."""
    if "access.parquet" not in (manifest.get("files") or {}):
        return EMPTY
    apath = Path(path) / "access.parquet"
    pf = open_parquet(apath, "kernbench-access")
    rows, cap = pf.metadata.num_rows, max_access_rows(int(manifest.get("n_ops") or 0))
    if rows > cap:  # read columnar, and never more rows than the op log can name
        raise limits.TraceLimitError(f"{apath}: {rows:,} rows, over the {cap:,} that "
                                     f"{manifest.get('n_ops'):,} ops can name")
    return access_table(read(pf, apath), apath)


def _hw_memory(hw: HwConfig) -> int:
    """Bytes replay's per-PE memories of ``hw`` may take (with their valid maps; slots of
    messages sent by PE index are counted by what the trace uses, ``validate_trace``)."""
    ipcq = directions_bytes(hw.ipcq_depth, hw.ipcq_slot_bytes)
    return 2 * hw.n_pe * (hw.kernel_scratch_bytes + hw.stage_bytes + ipcq)


def check_manifest(manifest: dict[str, Any], where: str) -> HwConfig:
    """Every manifest field has its type; the hardware is sane and fits the budget."""
    for key, types, required in MANIFEST_FIELDS:
        value = manifest.get(key)
        if value is None and not required:
            continue
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            raise TraceFormatError(f"{where}: field {key!r} is {_short(value)}, expected "
                                   f"{' or '.join(t.__name__ for t in types)}")
    origin = manifest.get("retimed_from")
    if origin is not None and (set(origin) != set(RETIMED_FROM) or not all(
            isinstance(origin[k], t) and not isinstance(origin[k], bool)
            for k, t in RETIMED_FROM.items())):
        want = ", ".join(f"{k}: {t.__name__}" for k, t in RETIMED_FROM.items())
        raise TraceFormatError(f"{where}: retimed_from {_short(origin)} is not {{{want}}}")
    for key in ("n_ops", "t_end_ps", "scratch_peak_bytes"):
        if key in manifest and not 0 <= manifest[key] < MAX_VALUE:
            raise TraceFormatError(f"{where}: {key} {manifest[key]!r} is out of range")
    files = manifest["files"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise TraceFormatError(f"{where}: 'files' must map file names to sha256 strings")
    if not all(isinstance(g, int) and not isinstance(g, bool) and 0 < g < 1 << 31
               for g in manifest["grid"]):
        raise TraceFormatError(f"{where}: grid {_short(manifest['grid'])} is not a list of "
                               "positive sizes")
    hw_dict = manifest["hw"]
    for k, v in hw_dict.items():
        if isinstance(v, float) and not (math.isfinite(v) and v < MAX_VALUE):
            raise TraceFormatError(f"{where}: hw {k} = {v!r} is not a finite number")
        if isinstance(v, int) and v >= MAX_VALUE:
            raise TraceFormatError(f"{where}: hw {k} = {v!r} is absurd")
    try:
        hw = HwConfig.from_dict(hw_dict, where=f"{where} hw")
    except (BadInputError, TypeError, ValueError) as exc:
        msg = (str(exc).splitlines() or ["unusable"])[0]
        raise TraceFormatError(msg if msg.startswith(where) else f"{where}: {msg}") from None
    if hw.n_pe > limits.MAX_N_PE or not isinstance(hw.n_pe, int):
        raise TraceFormatError(f"{where}: hw n_pe {hw.n_pe!r} is not an integer in "
                               f"1..{limits.MAX_N_PE}")
    limits.require(f"{where}: hw memories (n_pe x scratch, stage, ipcq)", _hw_memory(hw))
    return hw


def _short(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def validate_trace(path: Path, manifest: dict[str, Any], n_pe: int) -> Validation:
    """Check the footers (raising on the unreadable), then every tensor and op row."""
    t_path, o_path = path / "tensors.parquet", path / "ops.parquet"
    tpf = open_parquet(t_path, "kernbench-tensors")
    rows = tpf.metadata.num_rows
    if rows > limits.MAX_TENSORS:
        raise limits.TraceLimitError(f"{t_path}: {rows:,} tensors, over the limit of "
                                     f"{limits.MAX_TENSORS:,}")
    opf = open_parquet(o_path, "kernbench-ops")
    n_rows = opf.metadata.num_rows
    if n_rows != manifest["n_ops"]:
        raise TraceFormatError(f"{o_path}: {n_rows:,} rows but the manifest says n_ops = "
                               f"{manifest['n_ops']:,}")
    limits.require_rows(str(o_path), n_rows)
    found = Findings(KEEP)
    tensors = read(tpf, t_path)
    regions, tensor_bytes = tensor_findings(tensors, n_pe, found)
    limits.require(f"{t_path} (HBM tensors)", 2 * tensor_bytes)
    access = read_access(path, manifest)
    shared = read_shared(path, manifest)
    names = list(SCHEMAS["kernbench-ops"].names)
    version = version_parts(manifest["schema_version"])
    ops = None
    hw = check_manifest(manifest, str(Path(path) / "manifest.json"))  # (checked when opened)
    ipcq = IpcqUse(n_pe, hw.ipcq_depth, hw.ipcq_slot_bytes)
    if n_rows <= SMALL_OPS_ROWS:  # decoded whole and checked in one pass; kept for replay
        ops = read(opf, o_path, names)
        ops_findings(ops.combine_chunks().to_batches(), regions, n_pe, found, access, version,
                     ipcq)
    else:
        ops_findings(batches(opf, o_path, BATCH_ROWS, names), regions, n_pe, found, access,
                     version, ipcq)
    pa.default_memory_pool().release_unused()  # hand the batches' memory back before use
    base = directions_bytes(hw.ipcq_depth, hw.ipcq_slot_bytes)  # in the manifest's budget
    limits.require(f"{o_path}: the ipcq slots of messages sent by PE index (with their valid "
                   "maps)", 2 * sum(max(0, e - base) for e in ipcq.extent.values()))
    counts = {r: found.counts.get(r, 0) for r in RULES}
    return Validation(counts, tuple(found.rows), ops, tensors, opf, access, ipcq.extent,
                      shared)

