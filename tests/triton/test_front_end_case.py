"""``kbt.case`` and ``kbt.capture`` on small kernels: record, replay verified, outputs,
manifest launch options, autotune configs, torch CPU tensors, capture write-back."""

from __future__ import annotations

import json

import numpy as np
import pytest
import triton
import triton.language as tl

import kernbench as kb
from kernbench import triton as kbt


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)


def add_case(n: int = 1000, block: int = 256) -> kb.Case:
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    y, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    return kbt.case(add_kernel, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), x, y, out, n,
                    BLOCK=block, name="add",
                    reference=lambda x_ptr, y_ptr, **_: {"out_ptr": x_ptr + y_ptr})


@triton.jit
def scale_kernel(x_ptr, out_ptr, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * eps.to(tl.float32) + 1)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2, num_stages=2),
                          triton.Config({"BLOCK": 128}, num_warps=8, num_stages=4)],
                 key=["n"])
@triton.jit
def tuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


def test_vector_add_records_and_replays_verified(tmp_path, kb_replay_pool) -> None:
    c = add_case()
    assert {n: t.role for n, t in c.tensors.items()} == {
        "x_ptr": "input", "y_ptr": "input", "out_ptr": "inout"}  # outputs: arrays stored to
    assert c.grid == (4,) and c.kernel.name.endswith(":add_kernel")
    kb.record(c, out=tmp_path / "add.ktrace")
    res = kb.replay(tmp_path / "add.ktrace", case=add_case, pool=kb_replay_pool)
    assert res.verified, res.verdict
    assert res.max_abs_err["out_ptr"] == 0.0


def test_src_lines_name_the_kernel_source(tmp_path) -> None:
    ops = kb.record(add_case(), out=tmp_path / "a.ktrace").ops
    assert set(ops["src"].unique().to_list()) == {f"{__name__.replace('.', '/')}.py:21"}


def test_manifest_records_launch_options_and_scalar_arguments(tmp_path) -> None:
    x = np.arange(64, dtype=np.float32)
    c = kbt.case(scale_kernel, (1,), x, np.zeros(64, np.float32), 0.5, BLOCK=64,
                 num_warps=8, num_stages=2)
    t = kb.record(c, out=tmp_path / "s.ktrace")
    manifest = json.loads((tmp_path / "s.ktrace" / "manifest.json").read_text())
    assert manifest["params"] == {"eps": 0.5, "BLOCK": 64, "num_warps": 8, "num_stages": 2}
    res = kb.replay(t.path, in_process=True)
    np.testing.assert_array_equal(res.outputs["out_ptr"], x * 0.5 + 1)


@pytest.mark.parametrize(("config", "grid", "warps"), [(None, 16, 2), (1, 8, 8)])
def test_autotuned_kernel_records_the_chosen_config(tmp_path, config, grid, warps) -> None:
    x = np.arange(1000, dtype=np.float32)
    c = kbt.case(tuned_kernel, lambda meta: (triton.cdiv(1000, meta["BLOCK"]),), x,
                 np.zeros_like(x), 1000, config=config, outputs=["out_ptr"])
    assert c.grid == (grid,) and c.params["num_warps"] == warps
    assert c.params["config"] == (config or 0)
    t = kb.record(c, out=tmp_path / "t.ktrace")
    np.testing.assert_array_equal(kb.replay(t.path, in_process=True).outputs["out_ptr"], 2 * x)


def test_torch_cpu_tensors_are_array_arguments(tmp_path) -> None:
    import torch  # a test extra (.ci/run installs it): never skipped
    x = torch.arange(64, dtype=torch.float32)
    c = kbt.case(scale_kernel, (1,), x, torch.zeros(64), 2.0, BLOCK=64)
    np.testing.assert_array_equal(c.inputs()["x_ptr"], x.numpy())
    t = kb.record(c, out=tmp_path / "t.ktrace")
    np.testing.assert_array_equal(kb.replay(t.path, in_process=True).outputs["out_ptr"],
                                  x.numpy() * 2 + 1)


def test_capture_records_each_launch_and_writes_outputs_back(tmp_path) -> None:
    n = 300
    x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    y, out = np.full(n, 2.0, np.float32), np.zeros(n, np.float32)
    with kbt.capture(tmp_path / "cap") as cap:
        add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
        add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](out, y, out, n, BLOCK=64)
    np.testing.assert_array_equal(out, (x + 2) + 2)
    assert [p.name for p in cap.traces] == ["0000-add_kernel.ktrace", "0001-add_kernel.ktrace"]
    assert all((p / "manifest.json").is_file() for p in cap.traces)


def test_outputs_must_name_array_arguments() -> None:
    with pytest.raises(kb.BadInputError, match=r"outputs \['n'\] are not array arguments"):
        kbt.case(add_kernel, (1,), np.zeros(4, np.float32), np.zeros(4, np.float32),
                 np.zeros(4, np.float32), 4, BLOCK=4, outputs=["n"])
