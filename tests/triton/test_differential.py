"""kernbench's replay against Triton's own interpreter on the same kernels and inputs.

The interpreter (``TRITON_INTERPRET=1``, torch CPU tensors) is the oracle for Triton's
semantics where a reimplementation could drift: C-style integer ``//`` and ``%``, dtype
promotion of mixed operands, accumulator types of reductions, ``other`` and masked stores.
It runs in a process of its own (one for the whole module: torch is slow to import, and the
test process never imports it), npz in, npz out. No kernel here uses a bf16 ``dot`` (the
interpreter's is known to be wrong). The semantics kernels must agree bit for bit; the others
within one rounding of their output dtype (exp, reduction order and atomics' order differ).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.triton.conftest import ALL, EXACT, SEMANTICS, Entry, params

ROOT = Path(__file__).resolve().parents[2]
INTERPRET = "from tests.triton.kernels.spec import interpret_main; interpret_main()"


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, np.ndarray]]:
    """Every kernel of ALL run once under Triton's interpreter: entry id -> arrays after."""
    tmp = tmp_path_factory.mktemp("interpreter")
    jobs = []
    for entry in ALL:
        np.savez(tmp / f"{entry.id}-in.npz", **entry.make_launch().arrays())
        jobs.append({"factory": entry.launch_spec, "params": entry.params,
                     "inputs": str(tmp / f"{entry.id}-in.npz"),
                     "out": str(tmp / f"{entry.id}-out.npz")})
    (tmp / "request.json").write_text(json.dumps(jobs))
    path = os.pathsep.join([str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, "-c", INTERPRET, str(tmp / "request.json")],
                          env=env, cwd=tmp, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {e.id: dict(np.load(tmp / f"{e.id}-out.npz")) for e in ALL}


def _assert_agree(got: np.ndarray, oracle: np.ndarray, exact: bool, what: str) -> None:
    assert got.shape == oracle.shape and got.dtype == oracle.dtype, (what, got.dtype,
                                                                     oracle.dtype)
    if exact or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, oracle, err_msg=what)
    else:
        tol = 2e-3 if got.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(got.astype(np.float64), oracle.astype(np.float64),
                                   rtol=tol, atol=tol, err_msg=what)


@params(SEMANTICS)
def test_interpreter_agrees_with_the_closed_form_semantics(entry: Entry, interpreted) -> None:
    """The references of the semantics kernels are Triton's rules (checked without
    kernbench: if this fails, the reference is wrong, not the front end)."""
    for name, want in entry.make_launch().expected().items():
        _assert_agree(interpreted[entry.id][name], want, True, f"{entry.id}: {name}")


@params(ALL)
def test_replay_matches_triton_interpreter(entry: Entry, interpreted, replayed) -> None:
    _, res = replayed(entry)
    assert res.outputs, res.verdict
    oracle = interpreted[entry.id]
    for name, got in res.outputs.items():
        _assert_agree(got, oracle[name], entry in EXACT, f"{entry.id}: {name}")
