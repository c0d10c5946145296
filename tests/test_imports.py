"""Import structure: every record module imports first in a fresh process (no cycle), the
replay process never loads the recorder, and ``import kernbench`` is lazy."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kernbench"
TRACES = Path(__file__).resolve().parents[1] / "traces"
RECORD_MODULES = sorted(p.stem for p in (SRC / "record").glob("*.py") if p.stem != "__init__")
#: what Phase 2 must not need (style rule 4; docs/adr/0005-isolated-replay.md)
NOT_IN_REPLAY = ("kernbench.record", "kernbench.tl", "kernbench.kernels", "greenlet", "simpy")


def replay_main_code(trace: Path) -> str:
    """Python source running ``python -m kernbench.replay TRACE`` in this interpreter, then
    printing JSON of its exit code and every loaded module name."""
    return ("import json, runpy, sys\n"
            f"sys.argv = ['kernbench.replay', {str(trace)!r}]\n"
            "try:\n"
            "    runpy.run_module('kernbench.replay', run_name='__main__', alter_sys=True)\n"
            "except SystemExit as exc:\n"
            "    code = exc.code\n"
            "print(json.dumps({'exit': code, 'modules': sorted(sys.modules)}))\n")


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


#: run in one fresh interpreter: each module imported first, with every kernbench module
#: dropped from ``sys.modules`` before it (an import cycle fails exactly as in a new process;
#: third-party modules stay loaded, they take no part in kernbench's cycles)
FIRST_IMPORTS = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "kernbench" or m.startswith("kernbench.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def test_each_record_module_imports_first_with_no_kernbench_module_loaded():
    modules = [f"kernbench.record.{m}" for m in RECORD_MODULES]
    proc = subprocess.run([sys.executable, "-c", FIRST_IMPORTS, *modules], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", proc.stdout


def test_replaying_a_builtin_case_never_loads_the_recorder_kernels_greenlet_or_simpy(tmp_path):
    trace = shutil.copytree(TRACES / "softmax.ktrace", tmp_path / "softmax.ktrace")
    # the real entry point (``python -m kernbench.replay``), then the loaded module names
    proc = _python(replay_main_code(trace))
    assert proc.returncode == 0, proc.stderr
    *lines, last = proc.stdout.strip().splitlines()
    result = json.loads(last)
    assert result["exit"] == 0 and lines[-1].startswith("verified"), proc.stdout
    loaded = [m for m in result["modules"]
              if any(m == bad or m.startswith(bad + ".") for bad in NOT_IN_REPLAY)]
    assert loaded == []
    assert "kernbench.case.references" in result["modules"]  # the reference came from there


def test_import_kernbench_loads_no_submodule_until_one_is_used():
    proc = _python("import sys, kernbench as kb\n"
                   "before = sorted(m for m in sys.modules if m.startswith('kernbench.'))\n"
                   "kb.Case\n"
                   "print(before, callable(kb.record), callable(kb.replay), kb.tl.__name__)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] True True kernbench.tl"


def test_every_builtin_case_has_its_reference_and_kernel_names_in_the_numpy_only_tables():
    import kernbench as kb
    from kernbench.case.references import BUILTIN_KERNELS, REFERENCES
    from kernbench.kernels.golden import GOLDEN

    assert set(REFERENCES) == set(BUILTIN_KERNELS) == set(kb.registry())
    for case, params in GOLDEN.values():
        assert kb.build_case(case, params).kernel.name in BUILTIN_KERNELS[case]
    assert kb.build_case("gqa-decode", {"S_kv": 1024, "T_kv": 256, "H_q": 16, "H_kv": 2,
                                        "stream": "composite"}).kernel.name in \
        BUILTIN_KERNELS["gqa-decode"]


def test_the_import_linter_contracts_hold():
    """The layers of record/ and replay's isolation, as `.ci/run` checks them (pyproject.toml)."""
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300,
                          cwd=SRC.parents[1])
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert re.search(r"Contracts: [1-9][0-9]* kept, 0 broken\.", proc.stdout), proc.stdout
