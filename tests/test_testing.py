"""The pytest plugin ``kernbench.testing``, run through ``pytester`` on a throwaway kernel.

The entry point is checked in a fresh interpreter; the other runs are in-process sessions
(pytester restores ``sys.modules`` after each), while their replays still run in child
processes."""

from __future__ import annotations

import importlib
import sys

import pytest

from kernbench.testing import assert_check_ok, assert_no_regression, assert_replay_ok

pytest_plugins = ["pytester"]

KERNEL = '''
import numpy as np
import kernbench as kb
from kernbench import tl

EXTRA = {extra}

@kb.kernel
def scale(x, y, *, n: int, tile: int):
    pid = tl.program_id(0)
    for j in range(n // tile):
        with tl.scratch_scope():
            a = tl.load(x + pid * n + j * tile, (tile,), tl.float32)
            for _ in range(EXTRA):
                a = a * 1.0
            tl.store(y + pid * n + j * tile, a * {factor})

def case(n: int = 1024, tile: int = 256):
    return kb.Case(
        name="scale", kernel=scale, grid=(2,),
        tensors={{"x": kb.tensor((2, n), "float32", init=kb.randn(seed=1)),
                  "y": kb.tensor((2, n), "float32", role="output")}},
        params={{"n": n, "tile": tile}},
        reference=lambda x: {{"y": x * 2.0}},
    )
'''

TESTS = '''
from pathlib import Path
from kernbench.testing import assert_check_ok, assert_no_regression, assert_replay_ok

import kern

GOLDEN = Path(__file__).parent / "goldens" / "scale.ktrace"

def test_scale(kb_record):
    trace = kb_record(kern.case, n=1024)
    assert trace.path.parent.name.startswith("test_scale")  # recorded into tmp_path
    assert_check_ok(trace)
    assert_replay_ok(trace, case="kern:case")
    assert_no_regression(GOLDEN, trace, latency="+1%")
'''


@pytest.fixture(scope="module", autouse=True)
def _loaded(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Load every module a plugin run uses into this process first, by one run of the same
    calls: an in-process session restores ``sys.modules`` when it ends, and a module loaded
    again inside the next one would be a second copy (a C extension cannot load twice, a
    second ``Case`` class is not a ``Case``)."""
    import kernbench as kb

    where = tmp_path_factory.mktemp("loaded")
    (where / "kern_loaded.py").write_text(KERNEL.format(extra=0, factor=2.0))
    sys.path.insert(0, str(where))
    try:
        kern = importlib.import_module("kern_loaded")
        trace = kb.record(kern.case(n=256), where / "t.ktrace")
        assert_check_ok(trace)
        assert_replay_ok(trace, case="kern_loaded:case")
        assert_no_regression(trace, trace)
    finally:
        sys.path.remove(str(where))
        sys.modules.pop("kern_loaded", None)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(kern=KERNEL.format(extra=0, factor=2.0), test_kern=TESTS)
    return pytester


def _rewrite_kernel(project: pytest.Pytester, extra: int, factor: float) -> None:
    """A new ``kern.py`` of the same size, maybe within the same second as the old one: its
    cached bytecode would still pass the (mtime, size) check, so it goes with the old file."""
    project.makepyfile(kern=KERNEL.format(extra=extra, factor=factor))
    for stale in (project.path / "__pycache__").glob("kern.*.pyc"):
        stale.unlink()


def test_plugin_is_registered_by_its_entry_point(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*--kb-update-goldens*"])


def test_missing_golden_fails_and_says_how_to_make_it(project: pytest.Pytester):
    result = project.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no golden trace at*--kb-update-goldens*"])
    assert not (project.path / "goldens").exists()


def test_update_goldens_then_the_same_kernel_passes(project: pytest.Pytester):
    project.runpytest_inprocess("--kb-update-goldens").assert_outcomes(passed=1)
    golden = project.path / "goldens" / "scale.ktrace"
    assert (golden / "manifest.json").is_file() and (golden / "ops.parquet").is_file()
    project.runpytest_inprocess().assert_outcomes(passed=1)


def test_a_slower_kernel_fails_the_regression_check(project: pytest.Pytester):
    project.runpytest_inprocess("--kb-update-goldens").assert_outcomes(passed=1)
    _rewrite_kernel(project, extra=3, factor=2.0)  # 3 more MATH ops per tile
    result = project.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*regressed against the golden*latency=+1%*", "*FAIL*"])
    # refreshing the golden accepts the new kernel
    project.runpytest_inprocess("--kb-update-goldens").assert_outcomes(passed=1)
    project.runpytest_inprocess().assert_outcomes(passed=1)


def test_a_wrong_kernel_fails_replay(project: pytest.Pytester):
    _rewrite_kernel(project, extra=0, factor=3.0)  # reference says * 2
    result = project.runpytest_inprocess("--kb-update-goldens")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*kernbench replay of*WRONG*"])


def test_check_rules_failure_shows_the_rule(pytester: pytest.Pytester):
    pytester.makepyfile(kern=KERNEL.format(extra=0, factor=2.0))
    pytester.makefile(".toml", rules='[[rule]]\nmetric = "latency_ps"\nop = "<"\nvalue = 1\n')
    pytester.makepyfile(test_rules='''
from pathlib import Path
from kernbench.testing import assert_check_ok
import kern

def test_rules(kb_record):
    assert_check_ok(kb_record(kern.case), rules=Path(__file__).parent / "rules.toml")
''')
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*kernbench check failed*", "*latency_ps*"])


def test_kb_record_takes_builtin_names_and_params(pytester: pytest.Pytester):
    pytester.makepyfile(test_builtin='''
from kernbench.testing import assert_check_ok

def test_builtin(kb_record):
    trace = kb_record("scale-exp", n=1024, tile=256)
    assert trace.manifest["case_params"]["n"] == 1024
    assert_check_ok(trace)
''')
    pytester.runpytest_inprocess().assert_outcomes(passed=1)


TWO_TILINGS = '''
import pytest
from kernbench.testing import assert_no_regression
import kern

def _both(kb_record):
    wide = kb_record(kern.case, n=1024, tile=256)
    narrow = kb_record(kern.case, n=1024, tile=32)   # same case name, its own directory
    assert wide.path != narrow.path and (wide.path / "manifest.json").is_file()
    assert wide.manifest["case_params"]["tile"] == 256
    assert narrow.manifest["case_params"]["tile"] == 32
    assert narrow.manifest["t_end_ps"] > wide.manifest["t_end_ps"]
    return wide, narrow

def test_faster_candidate(kb_record):
    wide, narrow = _both(kb_record)
    assert_no_regression(narrow, wide)          # Traces on both sides

def test_slower_candidate(kb_record):
    wide, narrow = _both(kb_record)
    assert_no_regression(wide, narrow)

def test_repeated_name_is_refused(kb_record):
    kb_record(kern.case, name="one")
    with pytest.raises(ValueError, match="name='one' was already recorded"):
        kb_record(kern.case, name="one")
'''


def test_two_variants_of_one_case_in_one_test_compare_as_traces(pytester: pytest.Pytester):
    """kb_record twice with one case name keeps both traces; assert_no_regression takes the
    Traces it returns and fails when the slower variant is the candidate."""
    pytester.makepyfile(kern=KERNEL.format(extra=0, factor=2.0), test_tilings=TWO_TILINGS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*FAILED*test_slower_candidate*"])
    result.stdout.fnmatch_lines(["*scale-2.ktrace regressed against the golden*scale.ktrace*"])


def test_a_session_run_in_process_keeps_the_outer_sessions_pool_and_update_flag(
        pytester: pytest.Pytester, kb_replay_pool, tmp_path):
    """A session inside a session (``pytester``'s in-process runs, an IDE's test runner)
    has its own replay pool and --kb-update-goldens flag: ending it closes neither of ours."""
    import kernbench as kb
    from kernbench.testing import updating_goldens

    pytester.makepyfile(test_inner='''
from kernbench.testing import updating_goldens

def test_inner(kb_replay_pool):
    assert updating_goldens()
    assert kb_replay_pool is not None
''')
    pytester.runpytest_inprocess("--kb-update-goldens").assert_outcomes(passed=1)
    assert not updating_goldens()
    (tmp_path / "kern_outer.py").write_text(KERNEL.format(extra=0, factor=2.0))
    sys.path.insert(0, str(tmp_path))
    try:
        trace = kb.record(importlib.import_module("kern_outer").case(n=256), tmp_path / "t")
        assert kb.replay(trace.path, case="kern_outer:case", pool=kb_replay_pool).verified
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kern_outer", None)


@pytest.mark.parametrize(("reference", "said"), [
    ("lambda x: {}", "verified nothing: replayed * not verified: the reference * compared no "
                     "output and not y"),
    ("lambda x: {'y': x * 3.0}", "*: WRONG: * y max_abs_err=*"),
])
def test_assert_replay_ok_fails_unless_every_output_was_verified(
        kb_replay_pool, tmp_path, reference: str, said: str):
    """A reference returning ``{}`` compares nothing: the replay is clean but ``unverified``,
    and ``assert_replay_ok`` fails saying so, as it does for a wrong output."""
    import fnmatch

    import kernbench as kb

    name = f"kern_ref_{abs(hash(reference))}"
    text = KERNEL.format(extra=0, factor=2.0).replace('lambda x: {"y": x * 2.0}', reference)
    assert reference in text
    (tmp_path / f"{name}.py").write_text(text)
    sys.path.insert(0, str(tmp_path))
    try:
        trace = kb.record(importlib.import_module(name).case(n=256), tmp_path / "t")
        with pytest.raises(pytest.fail.Exception) as failed:
            assert_replay_ok(trace, case=f"{name}:case", pool=kb_replay_pool)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
    assert fnmatch.fnmatch(str(failed.value), f"*{said}*"), str(failed.value)
