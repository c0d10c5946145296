"""``kbt.case`` without ``outputs=``: the outputs are the arrays the kernel stores to. The
recording of the case settles them from the stores it sees, so recording such a case runs the
kernel no extra time; a look at a role before any recording makes the dry recording instead.
Both give the same roles and the same trace bytes."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt
from kernbench.case.stored_roles import StoredRoles
from kernbench.triton import launch

FILES = ("ops.parquet", "tensors.parquet", "manifest.json")


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, hist_ptr, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs) + y)
    tl.atomic_add(hist_ptr + tl.program_id(0), 1.0)  # an atomic makes an output as well


def _case() -> kb.Case:
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(64, dtype=np.float32), rng.standard_normal(64, dtype=np.float32)
    return kbt.case(axpy, (4,), x, y, np.zeros(64, np.float32), np.zeros(4, np.float32), 2.0,
                    BLOCK=16, name="axpy")


def _roles(trace: kb.Trace) -> dict[str, str]:
    t = pq.read_table(trace.path / "tensors.parquet")
    return dict(zip(t.column("name").to_pylist(), t.column("role").to_pylist(), strict=True))


def test_the_recording_settles_the_roles_without_a_dry_recording(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(launch, "_STORED_CACHE", {})
    dry: list[str] = []
    real = launch.stored_arrays
    monkeypatch.setattr(launch, "stored_arrays", lambda *a: dry.append("dry") or real(*a))
    case = _case()
    assert isinstance(case.tensors, StoredRoles) and "out_ptr" in case.tensors
    trace = kb.record(case, tmp_path / "a.ktrace")
    assert dry == []
    want = {"x_ptr": "input", "y_ptr": "input", "out_ptr": "inout", "hist_ptr": "inout"}
    assert _roles(trace) == want
    assert {n: t.role for n, t in case.tensors.items()} == want and dry == []
    again = _case()  # the same launch again: the roles are known in this process
    assert not isinstance(again.tensors, StoredRoles) and again.tensors["hist_ptr"].role == "inout"


def test_a_role_looked_at_first_comes_from_a_dry_recording_and_the_trace_is_the_same(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(launch, "_STORED_CACHE", {})
    settled = kb.record(_case(), tmp_path / "settled.ktrace")
    monkeypatch.setattr(launch, "_STORED_CACHE", {})
    case = _case()
    assert case.tensors["out_ptr"].role == "inout" and case.tensors["x_ptr"].role == "input"
    looked = kb.record(case, tmp_path / "looked.ktrace")
    assert _roles(looked) == _roles(settled)
    for name in FILES:
        assert (looked.path / name).read_bytes() == (settled.path / name).read_bytes(), name
