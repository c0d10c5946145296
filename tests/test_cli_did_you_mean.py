"""A misspelt metric, hardware field or sweep-spec name is bad input that names the closest
known name (the one helper ``errors.closest``, as case names have it): exit 2, one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kernbench.cli import main
from kernbench.sweep import resolve_spec, run_sweep


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    root = tmp_path_factory.mktemp("dym")
    run_sweep(resolve_spec("scale-exp", ["tile=512,1024"]), root / "S", workers=1)
    trace = next((root / "S" / "points").iterdir())
    files = {
        "rules.toml": '[[rule]]\nmetric = "latncy"\nop = "<="\nvalue = 1\n',
        "hw.toml": "hbm_gpbs = 3\n",
        "grid.toml": 'case = "scale-exp"\n[grdi]\ntile = [1]\n',
        "stages.toml": 'case = "scale-exp"\n[stages]\nreplya = true\n',
        "best.toml": 'case = "scale-exp"\n[best]\nmetirc = "latency_ps"\n',
        "preset.toml": 'case = "scale-exp"\n[hw]\npreset = ["ahbm-v"]\n',
        "case.toml": 'case = "scale-ex"\n',
    }
    for name, text in files.items():
        (root / name).write_text(text)
    return {"root": root, "S": root / "S", "T": trace}


CASES = [  # (argv with placeholders, the suggestion)
    (["diff", "{S}", "{S}", "--fail-on", "latncy=+1%"], "did you mean 'latency_ps'?"),
    (["diff", "{T}", "{T}", "--fail-on", "latncy=+1%"], "did you mean 'latency_ps'?"),
    (["report", "{S}", "--sort", "latncy"], "did you mean 'latency_ps'?"),
    (["check", "{T}", "--rules", "{root}/rules.toml"], "did you mean 'latency_ps'?"),
    (["check", "{S}", "--rules", "{root}/rules.toml"], "did you mean 'latency_ps'?"),
    (["sweep", "scale-exp", "-p", "hw.hbm_gpbs=1,2", "-o", "{root}/X"],
     "did you mean 'hbm_gbps'?"),
    (["record", "scale-exp", "--hw", "{root}/hw.toml", "-o", "{root}/x.ktrace"],
     "did you mean 'hbm_gbps'?"),
    (["record", "scale-exp", "--hw", "hbm-v2", "-o", "{root}/x.ktrace"],
     "did you mean 'ahbm-v2'?"),
    (["record", "scale-exp", "-p", "hw.hbm_gbps=3", "-o", "{root}/x.ktrace"],
     "hardware fields are not case parameters; record on a TOML file of fields with --hw"),
    (["sweep", "{root}/grid.toml", "-o", "{root}/X"], "did you mean 'grid'?"),
    (["sweep", "{root}/stages.toml", "-o", "{root}/X"], "did you mean 'replay'?"),
    (["sweep", "{root}/best.toml", "-o", "{root}/X"], "did you mean 'metric'?"),
    (["sweep", "{root}/preset.toml", "-o", "{root}/X"], "did you mean 'ahbm-v"),
    (["sweep", "{root}/case.toml", "-o", "{root}/X"], "did you mean 'scale-exp'?"),
    (["sweep", "milestone-decod", "-o", "{root}/X"], "did you mean 'milestone-decode'?"),
    (["sweep", "milestone-concurency", "-o", "{root}/X"],
     "did you mean 'milestone-concurrency'?"),
]


@pytest.mark.parametrize("argv,hint", CASES, ids=lambda v: v if isinstance(v, str) else
                         " ".join(v[:2]))
def test_misspelt_names_say_did_you_mean(where, argv, hint):
    res = CliRunner().invoke(main, [a.format(**where) for a in argv])
    assert res.exit_code == 2, res.output
    assert hint in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert not (where["root"] / "X").exists() and not (where["root"] / "x.ktrace").exists()
