"""docs/tl.md is tested against the tl API: every public call has its exact signature as a
heading, its docstring's first paragraph in the page, and the page's example records and replays."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import kernbench as kb
from kernbench import tl
from kernbench.schemas.ops import OPS
from kernbench.schemas.ops_markdown import markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "tl.md"
#: generated from the op table, documented by it (adding an op touches the table only)
TABLE_CALLS = [op.value for op, spec in OPS.items() if spec.tl]
CALLS = [n for n in tl.__all__
         if callable(getattr(tl, n)) and (not isinstance(getattr(tl, n), type)
                                          or n == "scratch_scope") and n not in TABLE_CALLS]


def _plain_signature(fn) -> str:
    """The signature as a reader writes it: no annotations."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _sections() -> dict[str, str]:
    """heading signature -> the text under it (up to the next heading)."""
    text = DOC.read_text()
    parts = re.split(r"^### (tl\.\S.*)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


@pytest.mark.parametrize("name", CALLS)
def test_every_tl_call_has_its_exact_signature_as_a_heading(name):
    heading = f"tl.{name}{_plain_signature(getattr(tl, name))}"
    assert heading in _sections(), f"docs/tl.md has no '### {heading}'"


@pytest.mark.parametrize("name", CALLS)
def test_every_docstring_first_line_is_in_the_reference(name):
    doc = inspect.getdoc(getattr(tl, name))
    assert doc, f"tl.{name} has no docstring (the kernel API documents every call)"
    first = " ".join(doc.split("\n\n")[0].split())  # the first paragraph, one line
    text = " ".join(DOC.read_text().split())
    assert first in text, f"docs/tl.md does not carry the docstring of tl.{name}: {first!r}"


@pytest.mark.parametrize("name", TABLE_CALLS)
def test_every_table_op_is_documented_by_its_row(name):
    spec = next(s for op, s in OPS.items() if op.value == name)
    doc = inspect.getdoc(getattr(tl, name))
    assert doc.startswith(f"``{name}``: {spec.doc} (")
    assert f"| `{name}` |" in markdown() and f"| yes | {spec.doc} |" in markdown()
    assert f"### tl.{name}(" not in DOC.read_text()  # one copy: the table's


def test_no_heading_names_a_call_tl_does_not_have():
    assert len(_sections()) == len(CALLS)  # one heading per call (each has one, see above)
    for heading in _sections():
        name = heading.removeprefix("tl.").split("(")[0]
        assert name in CALLS, f"docs/tl.md documents tl.{name}, which does not exist"


def test_the_example_records_and_replays(tmp_path):
    text = DOC.read_text()
    code = re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)
    scope: dict = {}
    exec(compile(code, str(DOC), "exec"), scope)  # our own documentation, not a trace
    trace = kb.record(scope["case"], tmp_path / "doc.ktrace")
    assert trace.n_ops == 2 * (1024 // 256) * 6  # scope enter, load, mul, exp, store, exit
    res = kb.replay(trace.path, case=lambda: scope["case"], in_process=True)
    assert res.verified


def _section(title: str) -> str:
    m = re.search(rf"^## {title}\n(.*?)(?=^## )", DOC.read_text(), re.M | re.S)
    assert m, f"docs/tl.md has no '## {title}'"
    return m.group(1)


def test_dtypes_are_said_once_every_tl_dtype_listed_none_called_unsupported():
    """Issue 42: the page listed int64 and uint32 under Dtypes and said "no int64" under
    what is not supported. The truth is ``tl``'s dtype names."""
    names = [n for n in tl.__all__ if isinstance(getattr(tl, n), tl.DType)]
    listed = set(re.findall(r"`tl\.(\w+)`", _section("Dtypes")))
    assert listed == set(names)
    unsupported = _section("What is not supported")
    said = set(re.findall(r"\b(u?int\d+|float\d+|bfloat16|fp8)\b", unsupported))
    assert said and not said & set(names), said & set(names)
    assert f"the {len(names)} under [Dtypes]" in " ".join(unsupported.split())
