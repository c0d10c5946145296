"""Every built-in case and every Triton test kernel records on ahbm-v2 (async engines,
resident programs), replays verified against its reference, and ``check`` finds nothing."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench.kernels.golden import GOLDEN
from kernbench.kernels.registry import build_case
from kernbench.testing import assert_check_ok
from tests.triton.conftest import ALL, Entry


def _builtin(name: str, tmp_path) -> tuple[kb.Trace, kb.ReplayResult]:
    case, params = GOLDEN[name]
    trace = kb.record(build_case(case, params), tmp_path / f"{name}.ktrace", hw="ahbm-v2")
    return trace, kb.replay(trace.path, in_process=True)


def _triton(entry: Entry, tmp_path) -> tuple[kb.Trace, kb.ReplayResult]:
    factory = entry.factory()
    trace = kb.record(kb.build_case(entry.id, entry.params, factory=factory),
                      tmp_path / f"{entry.id}.ktrace", hw="ahbm-v2")
    return trace, kb.replay(trace.path, case=factory, in_process=True)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_builtin_case_replays_verified_on_ahbm_v2(name, tmp_path) -> None:
    trace, res = _builtin(name, tmp_path)
    assert trace.manifest["hw"]["engine_issue"] == "async"
    assert res.ok and res.verdict.get("reference") is not None, res.verdict
    assert_check_ok(trace)


@pytest.mark.parametrize("entry", ALL, ids=[e.id for e in ALL])
def test_triton_kernel_replays_verified_on_ahbm_v2(entry, tmp_path) -> None:
    trace, res = _triton(entry, tmp_path)
    assert res.ok and res.verdict.get("reference") is not None, res.verdict
    assert_check_ok(trace)
