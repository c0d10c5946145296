"""Corruption kinds for the fuzz suite: each edits a copy of a good trace in place.

``KINDS`` maps a name to ``(edit, bad)``: ``bad`` means every command must refuse the
trace (check: exit 1 or 2, the others exit 2); otherwise any honest exit 0/1/2 is fine.
Edits never need the manifest hash to match; the suite runs each kind with the hash left
stale and with it re-stamped (``restamp``).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.schemas.arrow import META_KEY
from kernbench.trace import file_sha256

OPS, TENSORS, MANIFEST = "ops.parquet", "tensors.parquet", "manifest.json"
MARKER = Path("/tmp/kernbench-fuzz-unpickled")  # created only if something unpickles


class _Bomb:
    """Unpickling this creates MARKER: proof that a reader unpickled trace metadata."""

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (str(MARKER), "w"))


def restamp(path: Path) -> None:
    """Make the manifest's sha256 match the (edited) data files, where it can."""
    mpath = path / MANIFEST
    if not mpath.is_file() or mpath.stat().st_size > 1 << 20:  # /dev/urandom, a huge one
        return
    try:
        manifest = json.loads(mpath.read_text())
        files = manifest["files"]
        fresh = {name: file_sha256(path / name) if (path / name).is_file() else want
                 for name, want in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return
    if fresh == files:  # nothing to re-stamp: keep a corrupt manifest as it is
        return
    files.update(fresh)
    try:
        mpath.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    except OSError:  # a read-only or immutable trace keeps its (matching) manifest
        pass


# -- helpers ----------------------------------------------------------------------------

def _table(path: Path) -> pa.Table:
    return pq.read_table(path)


def _write(path: Path, table: pa.Table) -> None:
    pq.write_table(table, path)


def _set_column(name: str, fn: Callable[[pa.ChunkedArray], pa.Array], file: str = OPS,
                field: pa.Field | None = None) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        t = _table(d / file)
        i = t.schema.get_field_index(name)
        col = fn(t.column(i))
        f = field or pa.field(name, col.type)
        _write(d / file, t.set_column(i, f, col))
    return edit


def _pylist(name: str, fn: Callable[[list], list], file: str = OPS) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        t = _table(d / file)
        i = t.schema.get_field_index(name)
        values = fn(t.column(i).to_pylist())
        typ = t.schema.field(i).type
        _write(d / file, t.set_column(i, t.schema.field(i).with_nullable(True),
                                      pa.array(values, typ if not pa.types.is_dictionary(typ)
                                               else pa.string()).cast(typ)))
    return edit


def _row(i: int, value: Any) -> Callable[[list], list]:
    def fn(values: list) -> list:
        values = list(values)
        values[i] = value
        return values
    return fn


def _operand(role: str, key: str, value: Any, space: str = "hbm") -> Callable[[Path], None]:
    """Set ``key`` of the first ``space`` operand (input or output) to ``value``."""
    def fn(values: list) -> list:
        for v in values:
            ops = v if role == "inputs" else [v]
            for o in ops or []:
                if o and o["space"] == space:
                    o[key] = value
                    return values
        raise AssertionError(f"no {space} {role} operand")
    return _pylist(role, fn)


def _metadata(value: bytes | None, file: str = OPS, key: bytes = META_KEY
              ) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        t = _table(d / file)
        meta = dict(t.schema.metadata or {})
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
        _write(d / file, t.replace_schema_metadata(meta))
    return edit


def _manifest(fn: Callable[[dict], Any]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        m = json.loads((d / MANIFEST).read_text())
        fn(m)
        (d / MANIFEST).write_text(json.dumps(m, indent=2))
    return edit


def _set(keys: str, value: Any) -> Callable[[dict], None]:
    def fn(m: dict) -> None:
        *path, last = keys.split(".")
        for k in path:
            m = m[k]
        m[last] = value
    return fn


def _bytes(file: str, fn: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        (d / file).write_bytes(fn((d / file).read_bytes()))
    return edit


def _flip(at: float) -> Callable[[bytes], bytes]:
    def fn(b: bytes) -> bytes:
        i = min(int(len(b) * at), len(b) - 1)
        return b[:i] + bytes([b[i] ^ 0xFF]) + b[i + 1:]
    return fn


def _symlink(file: str, target: str) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        (d / file).unlink()
        (d / file).symlink_to(target)
    return edit


def _remove(file: str) -> Callable[[Path], None]:
    return lambda d: (d / file).unlink()


def _drop_column(name: str, file: str = OPS) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        t = _table(d / file)
        _write(d / file, t.drop_columns([name]))
    return edit


def _nan_times(d: Path) -> None:
    t = _table(d / OPS)
    i = t.schema.get_field_index("t_end_ps")
    col = pa.array([float("nan")] + [float(x) for x in t.column(i).to_pylist()[1:]])
    _write(d / OPS, t.set_column(i, pa.field("t_end_ps", pa.float64()), col))


def _struct_without_addr(d: Path) -> None:
    t = _table(d / OPS)
    i = t.schema.get_field_index("output")
    rows = [None if o is None else {k: v for k, v in o.items() if k != "addr"}
            for o in t.column(i).to_pylist()]
    _write(d / OPS, t.set_column(i, "output", pa.array(rows)))


def _rows(n: int) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        t = _table(d / OPS)
        _write(d / OPS, pa.concat_tables([t] * n))
    return edit


def _values(d: Path, data: bytes | None = None) -> None:
    (d / "replay").mkdir(exist_ok=True)
    if data is None:
        t = pa.table({"op_id": [0, 1], "checksum": ["x", "y"]})
        pq.write_table(t, d / "replay" / "values.parquet")
    else:
        (d / "replay" / "values.parquet").write_bytes(data)


def _read_only(d: Path) -> None:
    for p in [*d.iterdir(), d]:
        p.chmod(0o555 if p.is_dir() else 0o444)


def _immutable(d: Path) -> None:
    """chattr +i where the container allows it (else the trace stays as is: benign)."""
    subprocess.run(["chattr", "+i", str(d / OPS), str(d / MANIFEST)], capture_output=True,
                   check=False)


def _deep_manifest(d: Path) -> None:
    text = (d / MANIFEST).read_text().replace('"params": {', '"params": {"x": ' + "[" * 200_000
                                              + "]" * 200_000 + ', ', 1)
    (d / MANIFEST).write_text(text)


def _short_data(d: Path) -> None:
    """Tensor 0 initialised from 3 stored bytes (its shape needs 16 KiB)."""
    _pylist("init", _row(0, '{"kind": "data"}'), TENSORS)(d)
    _pylist("data", _row(0, b"abc"), TENSORS)(d)


KINDS: dict[str, tuple[Callable[[Path], None], bool]] = {
    # truncations and bit flips
    "ops_truncated_half": (_bytes(OPS, lambda b: b[: len(b) // 2]), True),
    "ops_truncated_tail": (_bytes(OPS, lambda b: b[:-10]), True),
    "ops_empty": (_bytes(OPS, lambda b: b""), True),
    "ops_bitflip_data": (_bytes(OPS, _flip(0.3)), True),
    "ops_bitflip_footer": (_bytes(OPS, _flip(0.97)), True),
    "tensors_truncated": (_bytes(TENSORS, lambda b: b[: len(b) // 3]), True),
    "tensors_bitflip": (_bytes(TENSORS, _flip(0.5)), False),  # may land in a harmless byte
    "manifest_truncated": (_bytes(MANIFEST, lambda b: b[: len(b) // 2]), True),
    "manifest_garbage": (_bytes(MANIFEST, lambda b: os.urandom(256)), True),
    "manifest_huge": (_bytes(MANIFEST, lambda b: b" " * (2 << 20) + b), True),
    "manifest_deep_nesting": (_deep_manifest, True),
    # missing files, symlinks, odd paths
    "manifest_missing": (_remove(MANIFEST), True),
    "ops_missing": (_remove(OPS), True),
    "tensors_missing": (_remove(TENSORS), True),
    "ops_is_directory": (lambda d: ((d / OPS).unlink(), (d / OPS).mkdir()), True),
    "ops_symlink_dev_zero": (_symlink(OPS, "/dev/zero"), True),
    "manifest_symlink_dev_urandom": (_symlink(MANIFEST, "/dev/urandom"), True),
    "ops_symlink_loop": (_symlink(OPS, OPS), True),
    "ops_symlink_etc_passwd": (_symlink(OPS, "/etc/passwd"), True),
    "read_only": (_read_only, False),
    "immutable": (_immutable, False),
    # columns: missing, wrong types, nulls
    "ops_drop_busy": (_drop_column("busy_ps"), True),
    "ops_drop_attrs": (_drop_column("attrs"), True),
    "ops_busy_float": (_set_column("busy_ps", lambda c: c.cast(pa.float64())), True),
    "ops_nan_times": (_nan_times, True),
    "ops_op_id_string": (_set_column("op_id", lambda c: c.cast(pa.string())), True),
    "ops_output_no_addr": (_struct_without_addr, True),
    "ops_null_t_start": (_pylist("t_start_ps", _row(3, None)), True),
    "ops_null_name": (_pylist("name", _row(2, None)), True),
    "tensors_drop_shape": (_drop_column("shape", TENSORS), True),
    # out-of-range values and broken rules
    "ops_unknown_name": (_pylist("name", _row(1, "frobnicate")), True),
    "ops_kind_mismatch": (_pylist("kind", _row(1, "gemm")), True),
    "ops_attrs_not_json": (_pylist("attrs", _row(1, "{not json")), True),
    "ops_attrs_array": (_pylist("attrs", _row(1, "[1, 2]")), True),
    "ops_duplicate_op_id": (_pylist("op_id", _row(5, 4)), True),
    "ops_t_end_before_start": (_pylist("t_end_ps", _row(1, -5)), True),
    "ops_negative_issue": (_pylist("t_issue_ps", _row(1, -1)), True),
    "ops_time_overflow": (_pylist("busy_ps", _row(1, 2**63 - 1)), True),
    "ops_hbm_addr_negative": (_operand("inputs", "addr", -64), True),
    # outside every tensor: check fails, replay reports the invalid read, others may run
    "ops_hbm_addr_far": (_operand("inputs", "addr", 1 << 40), False),
    "ops_hbm_shape_bomb": (_operand("inputs", "shape", [1 << 40, 1 << 40]), True),
    "ops_tcm_shape_overflow": (_operand("output", "shape", [1 << 31] * 3, space="tcm"), True),
    "ops_unknown_dtype": (_operand("output", "dtype", "float128", space="tcm"), True),
    "ops_unknown_space": (_operand("output", "space", "l3", space="tcm"), True),
    # seq not dense: check fails, diff refuses (it aligns by (pe, seq)), others may run
    "ops_seq_all_zero": (_pylist("seq", lambda v: [0] * len(v)), False),
    "ops_pe_out_of_range": (_pylist("pe", _row(0, 999)), True),
    "ops_rows_not_n_ops": (_rows(3), True),
    # hostile metadata
    "ops_no_metadata": (_metadata(None), True),
    "ops_pickled_metadata": (_metadata(pickle.dumps(_Bomb())), True),
    "ops_metadata_other_format": (_metadata(b'{"format": "kernbench-tensors", '
                                            b'"schema_version": 1}'), True),
    "ops_metadata_version_99": (_metadata(b'{"format": "kernbench-ops", '
                                          b'"schema_version": 99}'), True),
    "ops_metadata_not_object": (_metadata(b"5"), True),
    "ops_pickled_pandas_metadata": (_metadata(pickle.dumps(_Bomb()), key=b"pandas"), True),
    "tensors_pickled_metadata": (_metadata(pickle.dumps(_Bomb()), TENSORS), True),
    # tensors
    "tensors_shape_bomb": (_pylist("shape", _row(0, [1 << 20, 1 << 20]), TENSORS), True),
    "tensors_negative_addr": (_pylist("addr", _row(1, -4096), TENSORS), True),
    "tensors_unknown_dtype": (_pylist("dtype", _row(0, "complex512"), TENSORS), True),
    "tensors_bad_init": (_pylist("init", _row(0, "{"), TENSORS), True),
    "tensors_data_short": (_short_data, True),
    "tensors_overlap": (_pylist("addr", _row(1, 0), TENSORS), True),
    # manifest fields
    "manifest_files_list": (_manifest(_set("files", ["ops.parquet"])), True),
    "manifest_n_ops_string": (_manifest(_set("n_ops", "80")), True),
    "manifest_n_ops_small": (_manifest(_set("n_ops", 3)), True),
    "manifest_scratch_bomb": (_manifest(_set("hw.kernel_scratch_kib", 1 << 40)), True),
    "manifest_stage_bomb": (_manifest(_set("hw.stage_kib", 1 << 32)), True),
    "manifest_n_pe_negative": (_manifest(_set("hw.n_pe", -1)), True),
    "manifest_n_pe_huge": (_manifest(_set("hw.n_pe", 10**7)), True),
    "manifest_clock_nan": (_manifest(_set("hw.clock_ghz", float("nan"))), True),
    "manifest_hw_string": (_manifest(_set("hw", "ahbm-v1")), True),
    "manifest_hw_unknown_field": (_manifest(_set("hw.warp_drive", 1)), True),
    "manifest_schema_version_4": (_manifest(_set("schema_version", 4)), True),
    "manifest_format_wrong": (_manifest(_set("format", "other")), True),
    "manifest_grid_string": (_manifest(_set("grid", "4")), True),
    "manifest_case_unknown": (_manifest(_set("case", "no-such-case")), False),
    # replay outputs
    "values_garbage": (lambda d: _values(d, os.urandom(300)), False),
    "values_wrong_schema": (_values, False),
}
