"""Every built-in case and every Triton test kernel records on ahbm-v3 (the chip: shared
HBM, TCM ports, a torus, an issue cost, ready-first engines), replays verified against its
reference, and ``check`` finds nothing."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench.kernels.golden import GOLDEN
from kernbench.kernels.registry import build_case
from kernbench.testing import assert_check_ok
from tests.triton.conftest import ALL, GUARDS, Entry

#: kernels that decide on data: the chip-wide machine does not time a guard yet (ADR-0840
#: keeps the guard's timing in one function, record/machine/guard.py, to port); each is
#: refused in one line there (the last test)
DECIDE = ["serving-decode"]
CHIP = [e for e in ALL if e not in GUARDS]


@pytest.mark.parametrize("name", sorted(set(GOLDEN) - set(DECIDE)))
def test_builtin_case_replays_verified_on_ahbm_v3(name, tmp_path) -> None:
    case, params = GOLDEN[name]
    trace = kb.record(build_case(case, params), tmp_path / f"{name}.ktrace", hw="ahbm-v3")
    assert trace.manifest["hw"]["name"] == "ahbm-v3"
    res = kb.replay(trace.path, in_process=True)
    assert res.verified, res.verdict
    assert_check_ok(trace)


@pytest.mark.parametrize("entry", CHIP, ids=[e.id for e in CHIP])
def test_triton_kernel_replays_verified_on_ahbm_v3(entry: Entry, tmp_path) -> None:
    factory = entry.factory()
    trace = kb.record(kb.build_case(entry.id, entry.params, factory=factory),
                      tmp_path / f"{entry.id}.ktrace", hw="ahbm-v3")
    res = kb.replay(trace.path, case=factory, in_process=True)
    assert res.verified, res.verdict
    assert_check_ok(trace)


def test_a_decision_on_data_is_refused_on_the_chip_in_one_line(tmp_path) -> None:
    from kernbench.errors import KernelError

    case, params = GOLDEN[DECIDE[0]]
    with pytest.raises(KernelError, match=r"paged_decode\.py:\d+: an if/while on data is not "
                       r"timed on hardware with a shared part"):
        kb.record(build_case(case, params), tmp_path / "d.ktrace", hw="ahbm-v3")
