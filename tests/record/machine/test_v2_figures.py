"""ahbm-v2's headline figures, read from recorded traces (never wall time): the README's
Triton vector add and the bench's Triton matmul, against ahbm-v1 on the same kernel."""

from __future__ import annotations

import kernbench as kb
from kernbench.analyze import metrics
from kernbench.bench.triton_kernels import matmul_case
from tests.triton.kernels import vector_add


def test_triton_vector_add_reaches_085_on_v2_against_006_on_v1(tmp_path) -> None:
    v2 = kb.record(vector_add.case(1 << 20, 1024), tmp_path / "v2.ktrace", hw="ahbm-v2")
    assert v2.manifest["programs_per_pe"] == 32  # the preset's cap; scratch allows more
    assert metrics(v2)["efficiency"] >= 0.85
    # v1 runs one program at a time per PE: the efficiency does not depend on n
    v1 = kb.record(vector_add.case(1 << 16, 1024), tmp_path / "v1.ktrace", hw="ahbm-v1")
    assert 0.05 <= metrics(v1)["efficiency"] <= 0.07


def test_triton_matmul_512_fp16_reaches_08_on_v2(tmp_path) -> None:
    trace = kb.record(matmul_case(512), tmp_path / "mm.ktrace", hw="ahbm-v2")
    assert metrics(trace)["efficiency"] >= 0.8
