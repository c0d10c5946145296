"""``kb.record`` takes what the ``kb_record`` fixture takes (one implementation,
``kernels.registry.as_case``): a Case, a built-in name, ``"module:function"`` or a factory,
with the factory's parameters as keywords."""

from __future__ import annotations

import sys

import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case

FACTORY_MODULE = '''
from kernbench.kernels.registry import build_case


def my_factory(tile: int = 512):
    return build_case("scale-exp", {"tile": tile})
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "kb_user_factories.py").write_text(FACTORY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield __import__("kb_user_factories")
    sys.modules.pop("kb_user_factories", None)


def _same_ops(a: kb.Trace, b: kb.Trace) -> bool:
    return (a.path / "ops.parquet").read_bytes() == (b.path / "ops.parquet").read_bytes()


def test_kb_record_takes_a_builtin_name_with_params(tmp_path):
    got = kb.record("scale-exp", out=tmp_path / "n.ktrace", tile=256)
    want = kb.record(build_case("scale-exp", {"tile": 256}), out=tmp_path / "c.ktrace")
    assert got.manifest["case_params"]["tile"] == 256 and _same_ops(got, want)
    assert got.manifest["builtin"] is True


def test_kb_record_takes_a_factory_and_module_function(tmp_path, user_module):
    by_fn = kb.record(user_module.my_factory, out=tmp_path / "f.ktrace", tile=1024)
    by_name = kb.record("kb_user_factories:my_factory", out=tmp_path / "m.ktrace", tile=1024)
    want = kb.record(build_case("scale-exp", {"tile": 1024}), out=tmp_path / "c.ktrace")
    assert _same_ops(by_fn, want) and _same_ops(by_name, want)
    assert by_name.manifest["factory"] == "kb_user_factories:my_factory"
    assert by_fn.manifest["case_params"] == {"tile": 1024}


def test_kb_record_refuses_params_for_a_built_case_and_other_objects(tmp_path):
    case = build_case("scale-exp")
    with pytest.raises(kb.BadInputError, match=r"parameters \['tile'\] are for a case factory"):
        kb.record(case, out=tmp_path / "x.ktrace", tile=4)
    with pytest.raises(kb.BadInputError, match=r"cannot record 3 \(int\)"):
        kb.record(3, out=tmp_path / "y.ktrace")
    with pytest.raises(kb.BadInputError, match="unknown case 'scale-ex'; did you mean"):
        kb.record("scale-ex", out=tmp_path / "z.ktrace")
    assert not any(tmp_path.iterdir())
