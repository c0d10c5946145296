"""Hostile version-2 traces (issue 27): each kind edits a copy of a small, good version-2
trace in place (strided, masked, access-referenced loads, a store, const, gather and an
atomic), then the manifest is re-stamped so the hashes match.

``KINDS`` maps a name to ``(edit, bad)``; ``bad``: every command must refuse the trace
(check: exit 1 or 2, the others exit 2). ``BOMBS``: memory bombs, run in children under
``resource`` limits only (``test_fuzz_v2.py``). ``base_case`` is the case factory the trace
is recorded from (``replay --case tests.fuzz.corrupt_v2:base_case``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import kernbench as kb
from kernbench import tl
from kernbench.record.lowering import addressing as ix

from .corrupt import restamp

OPS, TENSORS, ACCESS, MANIFEST = "ops.parquet", "tensors.parquet", "access.parquet", "manifest.json"
X = (np.arange(32, dtype=np.float32) * 0.5)
PERM = np.array([3, 1, 2, 0, 7, 5, 6, 4])
I64_MIN = -(1 << 63)


@kb.kernel
def v2_kernel(x, y, c):
    col = ix.load_indexed(x.tensor, np.arange(8) * 4, src="v2.py:1")  # strides [4]
    a = ix.load_indexed(x.tensor, np.arange(8) + 8, np.arange(8) < 6, -1.0, src="v2.py:2")
    b = ix.load_indexed(x.tensor, PERM + 16, src="v2.py:3")  # access offsets
    ix.store_indexed(y.tensor, np.arange(8), col + a + b, src="v2.py:4")
    with tl.scratch_scope():
        offs = ix.constant(np.arange(4, dtype=np.int32), tl.int32, src="v2.py:5")
        g = ix.gather(x.tensor, offs, src="v2.py:6")
        ix.store_indexed(y.tensor, np.arange(4) + 8, g, src="v2.py:7")
    ix.store_indexed(y.tensor, np.arange(4) * 2 + 9, 2.0, np.arange(4) < 3, src="v2.py:8")
    ix.atomic("add", c.tensor, np.arange(4), 1.0, src="v2.py:9")


def _reference(x: np.ndarray) -> dict[str, np.ndarray]:
    y = np.zeros(16, np.float32)
    y[:8] = x[0:32:4] + np.where(np.arange(8) < 6, x[8:16], -1.0) + x[PERM + 16]
    y[8:12] = x[:4]
    y[[9, 11, 13]] = 2.0
    return {"y": y, "c": np.ones(4, np.float32)}


def base_case() -> kb.Case:
    return kb.Case(name="v2-hostile", kernel=v2_kernel, grid=(1,),
                   tensors={"x": kb.tensor((32,), "float32", init=kb.data(X)),
                            "y": kb.tensor((16,), "float32", role="output"),
                            "c": kb.tensor((4,), "float32", role="output")},
                   reference=_reference)


# -- helpers ----------------------------------------------------------------------------------
def _rows(d: Path, file: str = OPS) -> tuple[list[dict], pa.Schema]:
    t = pq.read_table(d / file)
    return t.to_pylist(), t.schema


def _write_rows(d: Path, rows: list[dict], schema: pa.Schema, file: str = OPS) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), d / file)


def _ops(fn: Callable[[list[dict]], None]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        rows, schema = _rows(d)
        fn(rows)
        _write_rows(d, rows, schema)
    return edit


def _find(rows: list[dict], name: str, attr: str | None = None) -> dict:
    for r in rows:
        if r["name"] == name and (attr is None or attr in json.loads(r["attrs"])):
            return r
    raise AssertionError(f"no {name} row with {attr}")


def _attrs(name: str, attr: str | None, **change: Any) -> Callable[[Path], None]:
    """Set (or, with the value ``...``, delete) attrs keys of the first ``name`` row having
    ``attr``."""
    def fn(rows: list[dict]) -> None:
        r = _find(rows, name, attr)
        a = json.loads(r["attrs"])
        for k, v in change.items():
            if v is ...:
                a.pop(k, None)
            else:
                a[k] = v
        r["attrs"] = json.dumps(a)
    return _ops(fn)


def _access(kind: str, fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], None]:
    """Replace the first access.parquet array of ``kind`` by ``fn`` of it."""
    def edit(d: Path) -> None:
        rows, schema = _rows(d, ACCESS)
        r = next(r for r in rows if r["kind"] == kind)
        arr = np.frombuffer(r["data"], "<i8").copy()
        r["data"] = np.ascontiguousarray(fn(arr), "<i8").tobytes()
        _write_rows(d, rows, schema, ACCESS)
    return edit


def _set_first(arr: np.ndarray, value: int) -> np.ndarray:
    arr[0] = value
    return arr


def _operand_addr(name: str, attr: str, delta: int) -> Callable[[Path], None]:
    def fn(rows: list[dict]) -> None:
        r = _find(rows, name, attr)
        r["inputs"][0]["addr"] += delta
    return _ops(fn)


def _drop_input(name: str) -> Callable[[Path], None]:
    def fn(rows: list[dict]) -> None:
        r = _find(rows, name)
        r["inputs"] = r["inputs"][:1]
        a = json.loads(r["attrs"])
        a.pop("value", None)  # the value now comes from an input that is not there
        r["attrs"] = json.dumps(a)
    return _ops(fn)


def _manifest(fn: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(d: Path) -> None:
        m = json.loads((d / MANIFEST).read_text())
        fn(m)
        (d / MANIFEST).write_text(json.dumps(m, indent=2))
    return edit


def _unlist_access(m: dict) -> None:
    m["files"].pop(ACCESS)


def _access_rows(n: int) -> Callable[[Path], None]:
    """access.parquet with ``n`` rows (tiny masks): more than the op log can name."""
    def edit(d: Path) -> None:
        t = pq.read_table(d / ACCESS)
        one = pa.Table.from_pylist([{"id": 0, "kind": "mask", "dtype": "bool", "shape": [8],
                                     "data": b"\x3f"}], schema=t.schema)
        many = pa.concat_tables([one] * n)
        ids = pa.array(np.arange(1000, 1000 + n, dtype=np.int64))
        pq.write_table(pa.concat_tables([t, many.set_column(0, t.schema.field(0), ids)]),
                       d / ACCESS)
    return edit


def _replayed_then(edit: Callable[[Path], None]) -> Callable[[Path], None]:
    """Replay the trace (its replay/ is good), then edit the trace under it."""
    def fn(d: Path) -> None:
        kb.replay(d, case=base_case, in_process=True)
        edit(d)
    return fn


def _unbound_verdict(d: Path) -> None:
    kb.replay(d, case=base_case, in_process=True)
    v = json.loads((d / "replay" / "verdict.json").read_text())
    v.pop("trace_files")
    (d / "replay" / "verdict.json").write_text(json.dumps(v))


def _other_value(d: Path) -> None:
    _attrs("dma_read", "mask", other=7.0)(d)


KINDS: dict[str, tuple[Callable[[Path], None], bool]] = {
    # wrapping offsets and strides
    "stride_2_62": (_attrs("dma_read", "strides", strides=[1 << 62]), True),
    "stride_wraps_to_inside": (_attrs("dma_read", "strides", strides=[(1 << 62) + 1]), True),
    "stride_int64_min": (_attrs("dma_read", "strides", strides=[I64_MIN]), True),
    "base_2_62": (_attrs("dma_read", "strides", base=1 << 62), True),
    "base_int64_min": (_attrs("dma_read", "strides", base=I64_MIN), True),
    "atomic_stride_wraps": (_attrs("atomic_add", "strides", strides=[(1 << 62) + 1]), True),
    "access_offset_2_62": (_access("offsets", lambda a: _set_first(a, 1 << 62)), True),
    "access_offset_int64_min": (_access("offsets", lambda a: _set_first(a, I64_MIN)), True),
    "access_offset_wraps": (_access("offsets", lambda a: a + (1 << 62)), True),
    "misaligned_element_address": (_operand_addr("dma_read", "strides", 1), True),
    # malformed attrs, per op family
    "dma_other_not_a_number": (_attrs("dma_read", "mask", other="abc"), True),
    "dma_strides_not_a_list": (_attrs("dma_read", "strides", strides="4"), True),
    "dma_access_not_an_id": (_attrs("dma_read", "access", access="x"), True),
    "atomic_value_not_a_number": (_attrs("atomic_add", None, value="x"), True),
    "atomic_without_value_input": (_drop_input("atomic_add"), True),
    "atomic_without_elements": (_attrs("atomic_add", None, strides=...), True),
    "gather_mask_not_an_id": (_attrs("gather", None, mask="maybe"), True),
    "gather_other_a_list": (_attrs("gather", None, other=[1]), True),
    "const_values_missing": (_attrs("const", None, values=...), True),
    "const_values_a_string": (_attrs("const", None, values="abc"), True),
    "fill_value_a_string": (_attrs("fill", None, value="x"), True),
    "scope_exit_without_lo": (_attrs("scope_exit", None, lo=...), True),
    # version / file mismatches
    "manifest_v1_over_v2_rows": (_manifest(lambda m: m.update(schema_version=1)), True),
    "access_parquet_unlisted": (_manifest(_unlist_access), True),
    "access_parquet_missing": (lambda d: (d / ACCESS).unlink(), True),
    # row-count bomb (refused from the footer, before any row is read)
    "access_rows_over_the_cap": (_access_rows(20_000), True),
    # stale replay/: an honest verdict is fine, a stale one must be ignored and said so
    "replay_then_ops_edited": (_replayed_then(_other_value), False),
    "replay_then_access_edited": (_replayed_then(_access("offsets", lambda a: a[::-1])), False),
    "replay_verdict_unbound": (_unbound_verdict, False),
}
#: kinds whose replay/ readers must say the replay is not this trace's
STALE = ("replay_then_ops_edited", "replay_then_access_edited", "replay_verdict_unbound")


# -- memory bombs (children only) ---------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _padded(n: int, width: int) -> bytes:
    """The zigzag varint of ``n`` in exactly ``width`` bytes (continuation bytes of zero)."""
    raw = bytearray(_varint(_zigzag(n)))
    while len(raw) < width:
        raw[-1] |= 0x80
        raw.append(0)
    return bytes(raw)


def lie_in_footer(path: Path, small: int = 1000) -> None:
    """Make the footer's uncompressed sizes (row groups and column chunks) say ``small``:
    each size's varint is overwritten in place by one of the same length."""
    meta = pq.ParquetFile(path).metadata
    sizes = {meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)}
    sizes |= {meta.row_group(g).column(c).total_uncompressed_size
              for g in range(meta.num_row_groups) for c in range(meta.num_columns)}
    data = bytearray(path.read_bytes())
    (flen,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - flen
    for size in sorted(sizes, reverse=True):
        if size <= small:
            continue
        old = _varint(_zigzag(size))
        new = _padded(small, len(old))
        footer = bytes(data[start:-8])
        at = footer.find(old)
        while at >= 0:
            data[start + at:start + at + len(old)] = new
            footer = bytes(data[start:-8])
            at = footer.find(old, at + 1)
    path.write_bytes(bytes(data))


def _footer_lies(nbytes: int, rows: int = 100) -> Callable[[Path], None]:
    """tensors.parquet with ``rows`` more rows whose data hold ``nbytes`` of zeros in all, in
    lz4 pages (a few MB on disk), behind a footer that says 1000 bytes. The zeros are one
    calloc'd buffer never written; one row per page keeps the writer's buffers small."""
    def edit(d: Path) -> None:
        t = pq.read_table(d / TENSORS)
        t = t.set_column(t.schema.get_field_index("data"), pa.field("data", pa.large_binary()),
                         t.column("data").cast(pa.large_binary()))
        extra = pa.Table.from_pylist([t.slice(1, 1).to_pylist()[0]] * rows, schema=t.schema)
        offsets = np.arange(rows + 1, dtype=np.int64) * (nbytes // rows)
        zeros = pa.Array.from_buffers(pa.large_binary(), rows, [
            None, pa.py_buffer(offsets), pa.py_buffer(np.zeros(int(offsets[-1]), np.uint8))])
        extra = extra.set_column(extra.schema.get_field_index("data"), "data", zeros)
        pq.write_table(pa.concat_tables([t, extra]), d / TENSORS, compression="lz4",
                       use_dictionary=False, write_statistics=False, write_batch_size=1,
                       data_page_size=1 << 20)
        lie_in_footer(d / TENSORS)
    return edit


def tile_bomb(shape: list[int], n_rows: int = 1) -> Callable[[Path], None]:
    """``n_rows`` copies of the strided dma_read, each over a float32 tile of ``shape`` with
    strides all 0: every element is ``x[0]``, in bounds (a large tile's TCM output does not
    fit the scratch area: ``check`` says so, replay stops there)."""
    def fn(rows: list[dict]) -> None:
        r = _find(rows, "dma_read", "strides")
        r["inputs"][0]["shape"] = list(shape)
        r["output"]["shape"] = list(shape)
        r["attrs"] = json.dumps({"strides": [0] * len(shape)})
        for k in range(1, n_rows):
            extra = json.loads(json.dumps(r))
            extra["inputs"][0]["addr"] += 4 * k
            extra["op_id"] = len(rows)
            extra["seq"] = max(x["seq"] for x in rows if x["pe"] == r["pe"]) + 1
            rows.append(extra)
    def edit(d: Path) -> None:
        _ops(fn)(d)
        _manifest(lambda m: m.update(n_ops=pq.ParquetFile(d / OPS).metadata.num_rows))(d)
    return edit


BOMBS: dict[str, Callable[[Path], None]] = {
    "lz4_footer_lies_1_25_gib": _footer_lies(5 << 28),
    "indexed_tile_bomb_12x2_26": tile_bomb([1 << 26], 12),
}


def make(kind_edit: Callable[[Path], None], base: Path, dst: Path) -> Path:
    """A copy of ``base`` at ``dst`` with ``kind_edit`` applied and the hashes re-stamped."""
    import shutil

    shutil.copytree(base, dst, ignore=shutil.ignore_patterns("replay"))
    kind_edit(dst)
    restamp(dst)
    return dst
