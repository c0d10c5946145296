"""replay/session.py: the tensors a trace holds, read back as the recording wrote them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kernbench.replay.session import _contents, load_tensors
from kernbench.schemas.arrow import TENSORS
from kernbench.schemas.dtypes import by_name


@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize("sliced", [False, True])
def test_tensor_contents_are_each_rows_bytes_nulls_included(chunks, sliced):
    rng = np.random.default_rng(3)
    rows: list[bytes | None] = [rng.bytes(int(n)) if n % 3 else None
                                for n in rng.integers(0, 40, 12)]
    arr = pa.array(rows, pa.binary())
    if sliced:  # a view into a longer array: its offsets and validity start past the first
        arr = pa.array([b"skipped", *rows, b"after"], pa.binary()).slice(1, len(rows))
    cut = np.linspace(0, len(rows), chunks + 1).astype(int).tolist()
    column = pa.chunked_array([arr.slice(a, b - a) for a, b in zip(cut, cut[1:], strict=False)],
                              pa.binary())
    got = _contents(column)
    assert [None if g is None else bytes(g) for g in got] == rows  # as to_pylist reads them


@pytest.mark.parametrize("kind", [pa.large_binary(), pa.binary()])
def test_tensor_contents_of_any_binary_layout_read_alike(kind):
    rows = [b"ab", None, b"", bytes(range(7))]
    got = _contents(pa.chunked_array([pa.array(rows, kind)], kind))
    assert [None if g is None else bytes(g) for g in got] == rows


def test_load_tensors_reads_data_inits_without_copying_them():
    q = np.arange(12, dtype=np.float16).reshape(3, 4)
    table = pa.Table.from_pydict({
        "name": ["q", "k"], "role": ["input", "input"], "pe": [0, 0], "addr": [0, 64],
        "dtype": ["float16", "float32"], "shape": [[3, 4], [2]],
        "init": ['{"kind": "data"}', '{"kind": "randn", "scale": 1.0, "seed": 1}'],
        "data": [q.tobytes(), None]}, schema=TENSORS)
    got = {t.name: t for t in load_tensors(table)}
    assert got["q"].init.make_storage((3, 4), by_name("float16")).tobytes() == q.tobytes()
    held = np.frombuffer(table.column("data").chunk(0).buffers()[2], np.uint8)
    assert np.shares_memory(got["q"].init.array, held)  # a view of Arrow's buffer
    assert got["k"].init.kind == "randn"
