"""The sweep spec: TOML parsing, its canonical form, the points and their ids."""

from __future__ import annotations

import hashlib
import json
import tomllib

import pytest

from kernbench.case import factory_params
from kernbench.errors import BadInputError
from kernbench.kernels.registry import registry
from kernbench.sweep import parse_spec, resolve_spec
from kernbench.sweep.builtin import BUILTIN
from kernbench.sweep.points import expand
from kernbench.trace.hw import HwConfig

SPEC = """
case = "gqa-decode"
[grid]
S_kv = [4096, 32768]
T_kv = [256, 512]
[zip]
H_q = [8, 16, 8]
H_kv = [1, 2, 2]
[hw]
preset = ["ahbm-v1"]
hbm_gbps = [128, 256]
[stages]
replay = false
check = true
"""


def test_points_are_the_product_of_grid_zip_and_hardware():
    spec = parse_spec(tomllib.loads(SPEC))
    points = list(expand(spec))
    assert spec.n_points() == len(points) == 2 * 2 * 3 * 2
    combos = {tuple(p.columns) for p in points}
    assert len(combos) == len(points)
    zipped = {(dict(p.columns)["H_q"], dict(p.columns)["H_kv"]) for p in points}
    assert zipped == {(8, 1), (16, 2), (8, 2)}
    assert [k for k, _ in points[0].columns] == ["S_kv", "T_kv", "H_q", "H_kv", "hw.preset",
                                                 "hw.hbm_gbps"]
    assert [p.index for p in points] == list(range(len(points)))


def _expected_id(defaults: dict, columns: dict) -> str:
    """The id written out from its definition: sha256 of the case, the full params and the
    full hardware config as sorted compact JSON, first 16 hex digits."""
    params = {**defaults, **{k: v for k, v in columns.items() if not k.startswith("hw.")}}
    hw = HwConfig(hbm_gbps=columns["hw.hbm_gbps"]).to_dict()  # preset ahbm-v1 is the default
    body = json.dumps({"case": "gqa-decode", "params": params, "hw": hw}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def test_point_id_hashes_case_full_params_and_hardware():
    spec = parse_spec(tomllib.loads(SPEC))
    defaults = factory_params(registry()["gqa-decode"])
    points = list(expand(spec))
    assert len(points) == spec.n_points() == 24
    assert [p.point_id for p in points] == [_expected_id(defaults, dict(p.columns))
                                            for p in points]
    assert len({p.point_id for p in points}) == 24


def test_canonical_toml_round_trips():
    spec = parse_spec(tomllib.loads(SPEC))
    again = parse_spec(tomllib.loads(spec.to_toml()))
    assert again == spec
    assert again.to_toml() == spec.to_toml()


def test_cli_axes_make_the_same_spec_as_toml():
    text = 'case = "gemm"\n[grid]\nN = [128, 256]\n[hw]\nhbm_gbps = [64, 128]\n'
    from_toml = parse_spec(tomllib.loads(text))
    from_cli = resolve_spec("gemm", ["N=128,256", "hw.hbm_gbps=64,128"], replay=False,
                            check=False)
    assert from_cli.to_toml() == from_toml.to_toml()


def test_spec_file_with_rules_carries_their_text(tmp_path):
    (tmp_path / "r.toml").write_text('[[rule]]\nmetric = "latency"\nop = "<"\nvalue = 1\n')
    (tmp_path / "s.toml").write_text('case = "gemm"\n[stages]\ncheck = true\n'
                                     'rules = "r.toml"\n')
    spec = resolve_spec(str(tmp_path / "s.toml"))
    assert spec.check and "latency" in spec.rules_text
    assert 'rules = "rules.toml"' in spec.to_toml()


@pytest.mark.parametrize("text, match", [
    ('case = "gemm"\nfoo = 1\n', "unknown keys"),
    ('[grid]\nN = [1]\n', "case must be"),
    ('case = "gemm"\n[grid]\nN = []\n', "empty list"),
    ('case = "gemm"\n[grid]\nN = [1, 1]\n', "repeated values"),
    ('case = "gemm"\n[zip]\nN = [1, 2]\nK = [1]\n', "one length"),
    ('case = "gemm"\n[zip]\nN = [1, 1]\nK = [2, 2]\n', "repeated combinations"),
    ('case = "gemm"\n[hw]\npreset = ["nope"]\n', "unknown hw preset"),
    ('case = "gemm"\n[hw]\nwarp = [1]\n', "unknown hw field"),
    ('case = "gemm"\n[grid]\nN = [1]\n[zip]\nN = [2]\n', "both"),
    ('case = "gemm"\n[grid]\nstatus = [1]\n', "reserved"),
    ('case = "gemm"\n[stages]\nreplay = "yes"\n', "true or false"),
    ('case = "gemm"\n[best]\nper = ["N"]\n', r"\[best\]"),
])
def test_bad_specs_are_one_line_errors(text, match):
    with pytest.raises(BadInputError, match=match):
        parse_spec(tomllib.loads(text))


def test_unknown_case_and_parameter_are_bad_input():
    with pytest.raises(BadInputError, match="unknown case 'nope'"):
        list(expand(resolve_spec("nope")))
    with pytest.raises(BadInputError, match=r"no parameter\(s\) \['Q'\]"):
        list(expand(resolve_spec("gemm", ["Q=1,2"])))
    with pytest.raises(BadInputError, match="KEY=V1,V2"):
        resolve_spec("gemm", ["N"])


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_milestone_specs_expand(name):
    spec = resolve_spec(name)
    points = list(expand(spec))
    assert len(points) == spec.n_points() >= 3
