"""Every built-in case and every Triton test kernel records on ahbm-v3 (the chip: shared
HBM, TCM ports, a torus, an issue cost, ready-first engines), replays verified against its
reference, and ``check`` finds nothing — the kernels that decide on data (guards, the
built-in ``serving-decode``) among them (docs/adr/0843)."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench.kernels.golden import GOLDEN
from kernbench.kernels.registry import build_case
from kernbench.testing import assert_check_ok
from tests.triton.conftest import ALL, Entry


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_builtin_case_replays_verified_on_ahbm_v3(name, tmp_path) -> None:
    case, params = GOLDEN[name]
    trace = kb.record(build_case(case, params), tmp_path / f"{name}.ktrace", hw="ahbm-v3")
    assert trace.manifest["hw"]["name"] == "ahbm-v3"
    res = kb.replay(trace.path, in_process=True)
    assert res.verified, res.verdict
    assert_check_ok(trace)


@pytest.mark.parametrize("entry", ALL, ids=[e.id for e in ALL])
def test_triton_kernel_replays_verified_on_ahbm_v3(entry: Entry, tmp_path) -> None:
    factory = entry.factory()
    trace = kb.record(kb.build_case(entry.id, entry.params, factory=factory),
                      tmp_path / f"{entry.id}.ktrace", hw="ahbm-v3")
    res = kb.replay(trace.path, case=factory, in_process=True)
    assert res.verified, res.verdict
    assert_check_ok(trace)

