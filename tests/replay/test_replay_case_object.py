"""``kb.replay(path, case=...)`` takes a ``kb.Case`` as well as a factory; the README's own
kernel has its own name, and replaying it without a case says so."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case, registry

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_kernel() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    return next(b for b in blocks if "kb.Case(" in b and "@kb.kernel" in b)


@pytest.fixture(scope="module")
def readme(tmp_path_factory):
    """The README's kernel block, run as written (it records scale.ktrace in the cwd)."""
    where = tmp_path_factory.mktemp("readme")
    cwd = os.getcwd()
    os.chdir(where)
    try:
        ns: dict = {}
        exec(compile(_readme_kernel(), str(README), "exec"), ns)  # noqa: S102 - our README
    finally:
        os.chdir(cwd)
    return where / "scale.ktrace", ns["case"]


def test_readme_kernel_has_its_own_name(readme):
    path, case = readme
    assert case.name not in registry()
    res = kb.replay(path)
    assert res.verdict["reference"] is None
    assert f"case {case.name!r} is not a built-in case" in res.verdict["reference_note"]


def test_replay_takes_a_case_object(readme):
    path, case = readme
    res = kb.replay(path, case=case)
    assert res.ok and res.verdict["reference"] == f"case {case.name!r}"


def test_replay_takes_a_builtin_case_object_through_its_factory(tmp_path):
    case = build_case("scale-exp", {"tile": 256})
    trace = kb.record(case, out=tmp_path / "s.ktrace")
    res = kb.replay(trace.path, case=case)  # in the isolated child, by its factory's name
    assert res.ok and res.verdict["reference"] == case.factory
    assert case.factory == "kernbench.kernels.examples:scale_exp_case"


def test_replay_refuses_a_case_object_that_is_not_the_recorded_one(readme, tmp_path):
    path, case = readme
    other = kb.Case(name=case.name, kernel=case.kernel, grid=case.grid,
                    tensors={**case.tensors, "x": kb.tensor((2, 2048), "float32")},
                    params=case.params, reference=case.reference)
    with pytest.raises(kb.BadInputError, match=f"the given case {case.name!r} is not the "
                                               "recorded case"):
        kb.replay(path, case=other)


def test_replay_of_a_case_named_like_a_builtin_says_it_is_your_own(tmp_path):
    case = build_case("scale-exp")
    own = kb.Case(name="scale-exp", kernel=case.kernel, grid=case.grid, tensors=case.tensors,
                  params=case.params, reference=case.reference)
    trace = kb.record(own, out=tmp_path / "own.ktrace")
    note = kb.replay(trace.path).verdict["reference_note"]
    assert note.startswith("case 'scale-exp' was recorded from a case of your own, not the "
                           "built-in case of that name")
