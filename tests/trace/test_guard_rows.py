"""The ``guard`` row in the trace format (ADR-0840): its op-table entry, the manifest's minor
version, the validator's rules, and traces without guards read and written as before."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import TraceFormatError
from kernbench.schemas import guards
from kernbench.schemas.arrow import manifest_version, version_parts
from kernbench.schemas.ops import OPS, Cost, Engine, Kind, Op
from tests.conftest import rewrite_ops


@kb.kernel
def one_decision(flag, y):
    if tl.load(flag, (1,), tl.int32) > 0:
        tl.store(y, tl.full((1,), 1.0, tl.float32))


def _case(v: int = 3) -> kb.Case:
    return kb.Case(name="one", kernel=one_decision, grid=(1,),
                   tensors={"flag": kb.tensor((1,), "int32",
                                              init=kb.data(np.array([v], np.int32))),
                            "y": kb.tensor((1,), "float32", role="inout", init=kb.zeros())})


def test_the_guard_is_a_control_op_of_no_engine_priced_by_branch_cycles():
    spec = OPS[Op.GUARD]
    assert (spec.kind, spec.engine, spec.cost, spec.sem) == (Kind.CONTROL, Engine.NONE,
                                                             Cost.BRANCH, None)
    assert list(Op)[-1] is Op.GUARD  # appended: the writer's name dictionary is unchanged


def test_a_trace_with_a_guard_is_a_minor_version_and_one_without_stays_an_int(tmp_path):
    guarded = kb.record(_case(), tmp_path / "g.ktrace")
    assert guarded.manifest["schema_version"] == "1.1"
    assert version_parts("1.1") == (1, 1) and version_parts(3) == (3, 0)
    assert manifest_version(2) == 2 and manifest_version(2, 1) == "2.1"
    plain = kb.record(kb.build_case("scale-exp", {"n": 1024, "tile": 256}),
                      tmp_path / "p.ktrace")
    assert plain.manifest["schema_version"] == 1  # as before: an int, no minor


@pytest.mark.parametrize("version", ["1.x", "9.1", 1.1])
def test_a_bad_minor_version_is_refused(tmp_path, version):
    trace = kb.record(_case(), tmp_path / "g.ktrace")
    m = json.loads((trace.path / "manifest.json").read_text())
    m["schema_version"] = version
    (trace.path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TraceFormatError, match="is not supported"):
        kb.Trace.open(trace.path)


def _findings(path) -> list[str]:
    return kb.Trace.open(path, strict=False).validation.rule("schema")["message"].to_list()


def test_a_guard_in_a_trace_of_minor_version_0_is_a_schema_finding(tmp_path):
    trace = kb.record(_case(), tmp_path / "g.ktrace")
    m = json.loads((trace.path / "manifest.json").read_text())
    m["schema_version"] = 1
    (trace.path / "manifest.json").write_text(json.dumps(m))
    assert any("a guarded decision, a version-1.1 row in a trace whose manifest says "
               "schema_version 1" in f for f in _findings(trace.path))


@pytest.mark.parametrize(("attrs", "why"), [
    ('{"bits":2}', "attrs bits 2 is not a bool value"),
    ('{"bits":-1}', "attrs 'bits' is -1, expected an unsigned integer"),
    ("{}", "attrs lack 'bits'"),
])
def test_a_guard_whose_value_does_not_fit_its_operand_is_a_schema_finding(tmp_path, attrs, why):
    trace = kb.record(_case(), tmp_path / "g.ktrace")

    def edit(rows: list[dict]) -> None:
        for r in rows:
            if r["name"] == "guard":
                r["attrs"] = attrs
                if why.startswith("attrs bits 2"):  # a bool operand's bits are 0 or 1
                    r["inputs"][0]["dtype"] = "bool"
    rewrite_ops(trace.path, edit)
    found = _findings(trace.path)
    assert any(why in f for f in found), found


def test_a_guard_on_more_than_one_element_or_outside_tcm_is_a_schema_finding(tmp_path):
    trace = kb.record(_case(), tmp_path / "g.ktrace")

    def edit(rows: list[dict]) -> None:
        for r in rows:
            if r["name"] == "guard":
                r["inputs"][0]["shape"] = [2]
    rewrite_ops(trace.path, edit)
    assert any("a guard decides on one TCM element" in f for f in _findings(trace.path))


def test_guard_bits_round_trip_every_trace_dtype():
    from kernbench.schemas.dtypes import DTYPES

    for name, dt in DTYPES.items():
        v = np.zeros(1, dt.storage)
        v.view(np.uint8)[:] = 0xA5 if name != "bool" else 1
        bits = guards.encode(v)
        assert guards.fits(bits, name)
        assert guards.element(bits, name).tobytes() == v.tobytes()
    assert guards.show(guards.encode(np.array([-0.0], np.float32)), "float32") == "-0.0"
    assert guards.show(0x7FC0, "bfloat16").startswith("nan")


def test_a_recording_without_decisions_never_keeps_a_value_graph(tmp_path, monkeypatch):
    """Traces without guards are recorded exactly as before: the graph is never built."""
    from kernbench.record.guards import graph

    def refuse(*_a, **_k):
        raise AssertionError("a value graph was built for a recording without decisions")
    monkeypatch.setattr(graph.Shadow, "__init__", refuse)
    for hw in ("ahbm-v1", "ahbm-v2"):
        kb.record(kb.build_case("small-ops", {"iters": 5}), tmp_path / f"s{hw}.ktrace", hw=hw)
