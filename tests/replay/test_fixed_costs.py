"""Fixed costs of a replay (ADR-0515): the process that starts the replay child loads no
numpy or pyarrow, the replay of a bfloat16 trace never imports ml_dtypes, and the numpy
baseline of ``kernbench bench`` costs numpy only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from tests.test_imports import replay_main_code

import kernbench as kb
from kernbench.bench.fixed import README_ADD

TRACES = Path(__file__).resolve().parents[2] / "traces"
HEAVY = ("numpy", "pyarrow", "polars", "ml_dtypes")


def _modules(code: str) -> tuple[list[str], dict]:
    """Run ``code`` in a fresh interpreter; (its printed lines, the JSON of the last)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    *lines, last = proc.stdout.strip().splitlines()
    return lines, json.loads(last)


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules if m.split(".")[0] in names})


def test_the_launching_process_imports_no_numpy_or_pyarrow():
    _, got = _modules("import json, sys\n"
                      "import kernbench.cli\n"
                      "from kernbench.replay import replay\n"
                      "from kernbench.replay.result import exit_code, summary\n"
                      "from kernbench.replay.child import run_child\n"
                      "from kernbench.replay.pool import ReplayPool\n"
                      "from kernbench.case.factory import locate\n"  # replay --case M:F
                      "print(json.dumps({'modules': sorted(sys.modules)}))")
    assert _loaded(got["modules"], HEAVY) == []


@pytest.fixture(scope="module")
def bf16_replay(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict]:
    """One replay process (``python -m kernbench.replay``) of a bfloat16 trace: its printed
    lines and the JSON of its exit code and loaded modules."""
    dst = tmp_path_factory.mktemp("bf16") / "gqa-decode.ktrace"
    trace = shutil.copytree(TRACES / "gqa-decode.ktrace", dst)
    return _modules(replay_main_code(trace))


def test_replaying_a_bfloat16_trace_never_imports_ml_dtypes(bf16_replay):
    lines, got = bf16_replay
    assert got["exit"] == 0 and lines[-1].startswith("verified"), lines
    assert "numpy" in got["modules"] and "ml_dtypes" not in got["modules"]


def test_the_replay_process_imports_no_polars_pyarrow_compute_or_numpy_ma(bf16_replay):
    """The validator and the decoder read Arrow buffers with numpy (ADR-0630): a replay
    that validated, decoded, verified and wrote its trace loaded none of them."""
    lines, got = bf16_replay
    assert got["exit"] == 0 and lines[-1].startswith("verified"), lines
    assert "kernbench.trace.validate" in got["modules"]  # the rows were validated
    heavy = ("polars", "pyarrow.compute", "numpy.ma")
    assert [m for m in got["modules"] if m in heavy or m.startswith("polars.")] == []


def test_the_numpy_baseline_process_costs_numpy_only():
    _, got = _modules("import json, sys\n"
                      "from kernbench.bench import numpy_baseline\n"
                      "from kernbench.case.references import REFERENCES\n"
                      "print(json.dumps({'modules': sorted(sys.modules)}))")
    assert _loaded(got["modules"], HEAVY) == ["numpy"]


def test_a_bfloat16_output_is_shown_as_ml_dtypes_over_the_stored_bits(tmp_path):
    trace = shutil.copytree(TRACES / "gqa-decode.ktrace", tmp_path / "gqa-decode.ktrace")
    res = kb.replay(trace, in_process=True)
    o = res.outputs["o"]
    assert res.ok and o.dtype == np.dtype(ml_dtypes.bfloat16)
    assert res.outputs.raw["o"].dtype == np.uint16
    np.testing.assert_array_equal(o.view(np.uint16), res.outputs.raw["o"])
    again = kb.replay(trace)  # through the child: the same bits read back
    np.testing.assert_array_equal(again.outputs["o"].view(np.uint16), res.outputs.raw["o"])


def test_a_small_op_log_is_decoded_once_for_validation_and_replay(tmp_path, monkeypatch):
    """The validator's decoded rows are what replay reads: the reader never decodes a small
    ops.parquet a second time, and the replay still verifies."""
    import kernbench as kb
    from kernbench.bench.replay import small_ops_case
    from kernbench.replay import reader

    trace = kb.record(small_ops_case(programs=2, tiles=20, blocks=40), out=tmp_path / "t.ktrace")
    decoded = []
    real = reader.read
    monkeypatch.setattr(reader, "read", lambda *a, **k: decoded.append(a) or real(*a, **k))
    res = kb.replay(trace.path, case=lambda: small_ops_case(programs=2, tiles=20, blocks=40),
                    in_process=True)
    assert res.ok, res.verdict
    assert decoded == []


def test_tensors_parquet_is_read_once_per_replay(tmp_path, monkeypatch):
    """The validator's read of tensors.parquet (``kb.data`` contents and all) is the one the
    replay uses: the trace never reads the file a second time."""
    import kernbench as kb
    from kernbench.bench.replay import small_ops_case
    from kernbench.trace import directory

    trace = kb.record(small_ops_case(programs=2, tiles=20, blocks=40), out=tmp_path / "t.ktrace")
    again = []
    monkeypatch.setattr(directory, "read_table", lambda *a, **k: again.append(a))
    res = kb.replay(trace.path, case=lambda: small_ops_case(programs=2, tiles=20, blocks=40),
                    in_process=True)
    assert res.ok, res.verdict
    assert again == []


#: the README's add kernel module, as the bench's fixed-cost keys run it
ADD_MODULE = README_ADD


def test_replay_case_of_a_triton_launch_never_records_it_again(tmp_path, monkeypatch):
    """``replay --case`` of the README's add kernel (outputs found by a dry recording when it
    was recorded) takes its outputs from the trace's roles: the replay process verifies it
    without loading the recorder (the dry recording's home), simpy or ml_dtypes."""
    import importlib

    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "readme_add.py").write_text(ADD_MODULE)
    monkeypatch.syspath_prepend(str(mods))
    case = importlib.import_module("readme_add").add_case()
    assert case.tensors["out_ptr"].role == "inout" and case.tensors["x_ptr"].role == "input"
    trace = kb.record(case, out=tmp_path / "add.ktrace")
    code = ("import json, runpy, sys\n"
            f"sys.argv = ['kernbench.replay', {str(trace.path)!r}, '--case',"
            f" 'readme_add:add_case', '--case-path', {str(mods)!r}]\n"
            "try:\n"
            "    runpy.run_module('kernbench.replay', run_name='__main__', alter_sys=True)\n"
            "except SystemExit as exc:\n"
            "    code = exc.code\n"
            "print(json.dumps({'exit': code, 'modules': sorted(sys.modules)}))\n")
    lines, got = _modules(code)
    assert got["exit"] == 0 and lines[-1].startswith("verified: "), lines
    assert "kernbench.triton.launch" in got["modules"]  # the factory's own front end ran
    heavy = {"kernbench.record.recorder", "kernbench.record.rows.writer", "simpy", "ml_dtypes"}
    assert sorted(heavy & set(got["modules"])) == []
