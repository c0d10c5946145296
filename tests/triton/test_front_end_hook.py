"""``kbt.install()``: the stand-in ``triton`` modules resolve only where no Triton package is
importable (simulated in a child process by a meta-path finder that hides it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from kernbench import triton as kbt
from tests.triton.conftest import NO_TRITON

SRC = str(Path(__file__).resolve().parents[2] / "src")


MODULE = '''
import numpy as np
import triton
import triton.language as tl

@triton.jit
def fill(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.math.exp(offs.to(tl.float32) * 0.0) + 1)

def case(block: int = 16):
    from kernbench import triton as kbt
    return kbt.case(fill, (1,), np.zeros(block, np.float32), BLOCK=block,
                    reference=lambda x_ptr: {"x_ptr": np.full(block, 2.0, np.float32)})
'''


def _child(code: str, tmp_path: Path) -> dict:
    (tmp_path / "standin_mod.py").write_text(MODULE)
    proc = subprocess.run([sys.executable, "-c", NO_TRITON + textwrap.dedent(code)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": f"{SRC}:{tmp_path}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_stand_in_modules_resolve_without_triton(tmp_path) -> None:
    got = _child('''
        import json
        import kernbench.triton
        import triton, triton.language as tl, triton.language.math as m
        from triton.language.extra import libdevice
        import triton.language.extra.libdevice as ld
        print(json.dumps({"triton": triton.__version__, "jit": triton.jit.__module__,
                          "fp32": repr(tl.float32), "exp": m.exp.__module__,
                          "tanh": ld.tanh.__module__, "same": ld.tanh is libdevice.tanh,
                          "cdiv": triton.cdiv(10, 4), "p2": triton.next_power_of_2(5)}))
    ''', tmp_path)
    assert got["triton"].endswith("kernbench.stand-in") and got["jit"] == "kernbench.triton.jit"
    assert got["fp32"] == "float32" and got["exp"].startswith("kernbench.triton")
    assert got["tanh"].startswith("kernbench.triton") and got["same"]
    assert (got["cdiv"], got["p2"]) == (3, 8)


def test_case_factory_loads_without_triton_in_a_fresh_process(tmp_path) -> None:
    """``--case module:factory`` (CLI record, the replay child) installs the hook first."""
    got = _child('''
        import json, kernbench as kb
        from kernbench.case.factory import load_factory
        factory = load_factory("standin_mod:case", ["."])
        t = kb.record(factory(), out="t.ktrace")
        res = kb.replay("t.ktrace", case=factory, in_process=True)
        print(json.dumps({"verified": res.verified, "ref": res.verdict["reference"]}))
    ''', tmp_path)
    assert got["verified"] and got["ref"]


def test_install_never_shadows_an_installed_triton() -> None:
    import triton

    assert not getattr(triton, "KERNBENCH_STAND_IN", False)
    assert kbt.real_triton_available() and kbt.install() is False
