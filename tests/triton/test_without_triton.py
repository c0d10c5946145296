"""The same kernel modules on a machine without Triton: ``import triton`` resolves to
kernbench's stand-in modules (docs/triton.md), and every kernel still records, replays and matches
numpy.

A child process puts a meta-path finder first on ``sys.meta_path`` that raises
``ModuleNotFoundError`` for ``triton`` and ``triton.*`` (what a machine without Triton wheels
does), then imports ``kernbench.triton`` (its import hook provides the stand-ins) and the
kernel modules, unmodified. The replay runs in that child (``in_process``): a replay child
process would not inherit the finder and would find the installed triton.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.triton.conftest import ALL, NO_TRITON, Entry, params

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import importlib, json, sys, tempfile
from pathlib import Path

try:
    import triton
    blocked = False
except ModuleNotFoundError:
    blocked = True

import numpy as np
import kernbench as kb
import kernbench.triton  # the import hook: stand-in triton modules

import triton
import triton.language as tl
report = {"blocked": blocked, "triton": triton.__name__, "jit": triton.jit.__module__,
          "language": tl.__name__, "load": tl.load.__module__, "results": {}}
for job in json.loads(sys.argv[1]):
    try:
        module, _, func = job["case"].partition(":")
        factory = getattr(importlib.import_module(module), func)
        case = kb.build_case(func, job["params"], factory=factory)
        with tempfile.TemporaryDirectory() as tmp:
            kb.record(case, Path(tmp) / "t.ktrace")
            res = kb.replay(Path(tmp) / "t.ktrace", case=factory, in_process=True)
        module, _, func = job["launch"].partition(":")
        want = getattr(importlib.import_module(module), func)(**job["params"]).expected()
        diffs = {}
        for name, w in want.items():
            g = res.outputs.get(name)
            if g is None or g.shape != w.shape:
                diffs[name] = None
                continue
            with np.errstate(invalid="ignore"):  # inf - inf: equal infinities differ by 0
                d = np.abs(g.astype(np.float64) - w.astype(np.float64))
            diffs[name] = float(np.max(np.where(g == w, 0.0, d), initial=0.0))
        report["results"][job["id"]] = {"verified": res.verified, "reference": res.verdict.get(
            "reference"), "outputs": sorted(res.outputs), "max_abs_err": diffs}
    except Exception as exc:
        report["results"][job["id"]] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def without_triton() -> dict:
    jobs = [{"id": e.id, "case": e.case_spec, "launch": e.launch_spec, "params": e.params}
            for e in ALL]
    path = os.pathsep.join([str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", NO_TRITON + CHILD, json.dumps(jobs)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": path}, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_triton_imports_resolve_to_kernbench_stand_ins(without_triton: dict) -> None:
    assert without_triton["blocked"]  # the finder does hide the installed package
    assert without_triton["triton"] == "triton"
    assert without_triton["language"] == "triton.language"
    assert without_triton["jit"].startswith("kernbench.")
    assert without_triton["load"].startswith("kernbench.")


@params(ALL)
def test_triton_kernel_verifies_without_triton_installed(entry: Entry, without_triton: dict
                                                         ) -> None:
    got = without_triton["results"][entry.id]
    assert "error" not in got, got.get("error")
    assert got["verified"] and got["reference"], got
    want = entry.make_launch().expected()
    assert got["outputs"] == sorted(want)
    tol = {n: 4e-3 if w.dtype.name == "float16" else 1e-4 for n, w in want.items()}
    assert all(got["max_abs_err"][n] is not None and got["max_abs_err"][n] <= tol[n]
               for n in want), got["max_abs_err"]
