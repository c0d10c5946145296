"""Recordings shared by the retime tests: each (case, hardware) recorded once per session."""

from __future__ import annotations

import dataclasses
import filecmp
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kernbench as kb
from kernbench.bench.triton_kernels import matmul_case
from kernbench.trace.hw import HwConfig, load_hw

#: small built-in cases and a Triton kernel (lifetime mode, pipelined loads, indexed
#: memory): name -> a case factory
CASES: dict[str, Callable[[], kb.Case]] = {
    "scale-exp": lambda: kb.build_case("scale-exp", {"n": 512, "tile": 256}),
    "softmax": lambda: kb.build_case("softmax", {"rows": 8, "n": 128, "programs": 4}),
    "gemm": lambda: kb.build_case("gemm", {"M": 128, "N": 256, "K": 128, "BM": 64}),
    "gqa-decode-composite": lambda: kb.build_case("gqa-decode", {
        "S_kv": 512, "T_kv": 256, "H_q": 8, "H_kv": 2, "stream": "composite"}),
    "ring-decode": lambda: kb.build_case("ring-attention", {
        "n_ranks": 2, "S_kv_per_rank": 64, "phase": "decode"}),
    "serving-decode": lambda: kb.build_case("serving-decode", {
        "batch": 2, "S_max": 40, "H_q": 8, "H_kv": 1, "D": 16, "page": 16, "splits": 2}),
    "triton-matmul": lambda: matmul_case(64, 32, 32, 16),
}
#: the files a retimed trace must share byte for byte with a recording on its hardware
SAME = ("ops.parquet", "stream.parquet", "access.parquet", "shared.parquet", "tensors.parquet")


def hw(preset: str, **fields: Any) -> HwConfig:
    return dataclasses.replace(load_hw(preset), **fields)


def differences(retimed: Path, recorded: Path) -> list[str]:
    """What differs between a retimed trace and a recording: files by bytes, manifest
    fields (``retimed_from`` aside)."""
    out = [f for f in SAME if (retimed / f).exists() != (recorded / f).exists()
           or (recorded / f).exists() and not filecmp.cmp(retimed / f, recorded / f, False)]
    a = json.loads((retimed / "manifest.json").read_text())
    b = json.loads((recorded / "manifest.json").read_text())
    assert a.pop("retimed_from")["ops_sha256"]
    return out + [f"manifest {k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, HwConfig], Any]:
    """``recorded(case, hw)``: the case's trace on ``hw`` (recorded once), or the
    KernbenchError recording it raised."""
    root = tmp_path_factory.mktemp("retime-recordings")
    memo: dict[tuple[str, HwConfig], Any] = {}

    def get(case: str, hw: HwConfig) -> Any:
        key = (case, hw)
        if key not in memo:
            try:
                memo[key] = kb.record(CASES[case](), root / f"{case}-{len(memo)}.ktrace", hw=hw)
            except kb.KernbenchError as exc:
                memo[key] = exc
        return memo[key]

    return get
