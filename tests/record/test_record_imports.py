"""``kernbench record MODULE:FUNC`` imports only what recording that case uses (ADR-0635): not
the built-in kernels (the case is the user's), not ``pyarrow.compute`` or ``numpy.ma`` (the op
writer builds its columns from numpy buffers); a built-in name still finds its kernels."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

USER_MODULE = textwrap.dedent("""
    import numpy as np
    import kernbench as kb
    from kernbench import tl

    @kb.kernel
    def double(x, y, *, n: int):
        tl.store(y + tl.program_id(0) * n, tl.load(x + tl.program_id(0) * n, (n,),
                                                    tl.float32) * 2.0)

    def double_case(n: int = 64):
        return kb.Case(name="double", kernel=double, grid=(2,),
                       tensors={"x": kb.tensor((2, n), "float32", init=kb.randn(seed=0)),
                                "y": kb.tensor((2, n), "float32", role="output")},
                       params={"n": n}, reference=lambda x: {"y": x * 2.0})
""")

#: the CLI's record command in this interpreter, then the loaded module names
RECORD = """
import json, sys
from kernbench.cli import main
try:
    main(["record", "user_double:double_case", "-o", sys.argv[1]])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(sys.modules)))
"""

NOT_LOADED = ("kernbench.kernels.examples", "kernbench.kernels.gqa", "kernbench.kernels.ring",
              "kernbench.kernels.flash", "kernbench.kernels.streaming", "pyarrow.compute",
              "numpy.ma")


def test_recording_a_user_factory_case_loads_no_builtin_kernel_nor_pyarrow_compute(tmp_path):
    (tmp_path / "user_double.py").write_text(USER_MODULE)
    out = tmp_path / "double.ktrace"
    proc = subprocess.run([sys.executable, "-c", RECORD, str(out)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    *lines, last = proc.stdout.strip().splitlines()
    # two programs of a load, a multiply and a store
    assert len(lines) == 1 and lines[0].startswith("recorded user_double:double_case: 6 ops")
    loaded = json.loads(last)
    assert "kernbench.record.recorder" in loaded and (out / "ops.parquet").is_file()
    assert [m for m in NOT_LOADED if m in loaded] == []


def test_a_builtin_name_still_finds_its_kernels_on_first_look_up():
    from kernbench.kernels.registry import build_case, registry

    assert {"softmax", "gemm", "gqa-decode", "ring-attention"} <= set(registry())
    assert build_case("softmax", {"rows": 4, "n": 64, "programs": 2}).kernel.name == \
        "kernbench.kernels.examples:row_softmax"


def test_the_kernels_package_imports_no_kernel_module_itself():
    init = Path(__file__).resolve().parents[2] / "src" / "kernbench" / "kernels" / "__init__.py"
    tree = ast.parse(init.read_text())
    assert [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))] == []
