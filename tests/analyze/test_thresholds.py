"""User rules: TOML [[rule]] tables, evaluated against metrics, never as expressions."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernbench.analyze import check, metrics
from kernbench.analyze.thresholds import Rule, evaluate, load_rules, parse_rules
from kernbench.errors import BadInputError
from kernbench.trace import Trace


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "rules.toml"
    p.write_text(text)
    return p


def test_rules_pass_and_fail(traces, tmp_path: Path) -> None:
    path = traces("gemm", N=256)
    m = metrics(path)
    rules = _write(tmp_path, f"""
[[rule]]
metric = "latency"
op = "<="
value = {m["latency_ps"]}

[[rule]]
metric = "roofline_bound"
op = "=="
value = "dma_rd"

[[rule]]
metric = "efficiency"
op = ">"
value = 0.99

[[rule]]
metric = "scratch_peak_bytes"
op = "<"
value = 1
pe = 5
""")
    report = check(path, rules=rules)
    assert [r.ok for r in report.rules] == [True, True, False, True]
    assert report.rules[0].metric == "latency_ps"
    assert report.exit_code == 1
    assert report.violated() == ["rule efficiency > 0.99"]
    text = report.to_text()
    assert "efficiency > 0.99" in text and "FAIL" in text


def test_pe_rules_use_that_pes_metrics(traces) -> None:
    trace = Trace.open(traces("gemm", N=256))
    res = evaluate([Rule("dma_read_count", "==", 3, pe=0), Rule("dma_read_count", "==", 0, pe=4)],
                   trace)
    assert [r.ok for r in res] == [True, True]


@pytest.mark.parametrize("text,match", [
    ("[[rule]]\nmetric='x'\nop='=~'\nvalue=1\n", "op '=~' is not one of"),
    ("[[rule]]\nmetric='x'\nop='<'\n", "missing keys \\['value'\\]"),
    ("[[rule]]\nmetric='x'\nop='<'\nvalue=1\nexpr='1+1'\n", "unknown keys \\['expr'\\]"),
    ("[[rule]]\nmetric='x'\nop='<'\nvalue='big'\n", "needs a number"),
    ("[[rule]]\nmetric='x'\nop='<'\nvalue=1\npe=-1\n", "pe must be a PE index"),
    ("[[rule]]\nmetric='x'\nop='<'\nvalue=[1]\n", "value must be a number or string"),
    ("rule = 3\n", "must be an array of tables"),
    ("[limits]\nx = 1\n", "unknown top-level keys \\['limits'\\]"),
    ("[[rule]\n", "not valid TOML"),
])
def test_malformed_rules_files(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(BadInputError, match=match):
        load_rules(_write(tmp_path, text))


def test_missing_rules_file(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="rules file .*No such file"):
        load_rules(tmp_path / "absent.toml")


@pytest.mark.parametrize("rule,match", [
    (Rule("no_such_metric", "<", 1), "unknown metric 'no_such_metric'"),
    (Rule("roofline_bound", "==", 3), "not comparable"),
    (Rule("latency_ps", "<", 1, pe=99), "pe 99 is outside 0..7"),
])
def test_rules_that_cannot_be_evaluated(traces, rule: Rule, match: str) -> None:
    with pytest.raises(BadInputError, match=match):
        evaluate([rule], Trace.open(traces("gemm", N=256)))


def test_values_are_data_not_code() -> None:
    (rule,) = parse_rules({"rule": [{"metric": "latency_ps", "op": "==",
                                     "value": "__import__('os').system('false')"}]})
    assert rule.value == "__import__('os').system('false')"
