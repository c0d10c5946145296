"""Shared helpers: record a one-off kernel into a temporary trace.

The suite written before ahbm-v2 became the default records on ahbm-v1: ``KERNBENCH_HW`` is
set here, at import, so every recording that names no hardware (and every child process)
uses it. Tests of ahbm-v2 name it.

Property tests draw ``max_examples`` from the hypothesis profile: ``suite`` (the default,
sized for the five-minute suite) or ``thorough`` (``KERNBENCH_HYPOTHESIS=thorough``, ten
times the examples, for a nightly or a change to the code a property covers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import kernbench as kb

os.environ["KERNBENCH_HW"] = "ahbm-v1"

SUITE_EXAMPLES = 50
settings.register_profile("suite", max_examples=SUITE_EXAMPLES, deadline=None)
settings.register_profile("thorough", max_examples=10 * SUITE_EXAMPLES, deadline=None)
settings.load_profile(os.environ.get("KERNBENCH_HYPOTHESIS", "suite"))


def examples(suite: int) -> int:
    """``max_examples`` for a property slower than most: ``suite`` under the suite profile,
    scaled with the profile loaded (ten times under ``thorough``). Never a fixed count."""
    return max(1, suite * settings.default.max_examples // SUITE_EXAMPLES)


@pytest.fixture
def rec(tmp_path: Path):
    """``rec(kernel, tensors, grid=(1,), params=None, hw=None, name="t")`` -> kb.Trace."""
    counter = iter(range(10**6))

    def _record(kernel: Any, tensors: dict, grid: tuple[int, ...] = (1,),
                params: dict | None = None, hw: Any = None, reference: Any = None,
                name: str = "t") -> kb.Trace:
        case = kb.Case(name=name, kernel=kernel, grid=grid, tensors=tensors,
                       params=params or {}, reference=reference)
        return kb.record(case, tmp_path / f"{name}{next(counter)}.ktrace", hw=hw)

    return _record


def rows(trace: kb.Trace, name: str | None = None) -> list[dict]:
    """The op rows (optionally only ``name``) as dicts, in op_id order."""
    ops = trace.ops
    if name is not None:
        ops = ops.filter(ops["name"].cast(str) == name)
    return ops.to_dicts()


def rewrite_ops(path: Path, edit) -> None:
    """Hand-edit a trace: ``edit(list_of_row_dicts)`` in place, then rewrite ops.parquet with
    the OPS schema and re-stamp the manifest's sha256 so the trace still opens."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from kernbench.schemas.arrow import OPS
    from kernbench.trace import file_sha256

    path = Path(path)
    table = pq.read_table(path / "ops.parquet")
    rows_ = table.to_pylist()
    edit(rows_)
    pq.write_table(pa.Table.from_pylist(rows_, schema=OPS), path / "ops.parquet")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["ops.parquet"] = file_sha256(path / "ops.parquet")
    (path / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
