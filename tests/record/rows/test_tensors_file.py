"""record/rows/tensors.py: ``tensors.parquet`` holds each ``kb.data`` array's bytes in C order."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pyarrow.parquet as pq

import kernbench as kb
from kernbench.record.handle import HbmTensor
from kernbench.record.rows.tensors import write_tensors


def test_data_contents_are_c_order_bytes_of_the_stored_dtype(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    arrays = {"plain": x, "transposed": x.T,  # a view that is not C-contiguous
              "converted": x.astype(np.float64), "bf16": x.T.astype(ml_dtypes.bfloat16)}
    dtypes = {"plain": "float32", "transposed": "float32", "converted": "float32",
              "bf16": "bfloat16"}
    case = kb.Case(name="bytes", kernel=lambda: None, grid=(1,), tensors={
        n: kb.tensor(a.shape, dtypes[n], init=kb.data(a)) for n, a in arrays.items()})
    where = {n: HbmTensor(n, 4096 * i, a.shape, case.tensors[n].dtype)
             for i, (n, a) in enumerate(arrays.items())}
    write_tensors(tmp_path / "tensors.parquet", case, where)
    stored = dict(zip(*pq.read_table(tmp_path / "tensors.parquet").select(["name", "data"])
                      .to_pydict().values(), strict=True))
    want = {"plain": x, "transposed": np.ascontiguousarray(x.T), "converted": x,
            "bf16": np.ascontiguousarray(x.T.astype(ml_dtypes.bfloat16)).view(np.uint16)}
    for n, expected in want.items():
        assert stored[n] == expected.tobytes(), n
