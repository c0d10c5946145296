"""The chip's v3 traces are pinned: every built-in case at small parameters (on ``ahbm-v3``
and on variants of it that take the chip's other paths: ``in_order`` engines, blocking
issue, a ring without an issue cost, TCM ports alone), larger grids (resident programs,
ring prefill over 4 PEs) and the Triton test kernels (decisions on data included) record
to exactly the ``ops.parquet`` and ``shared.parquet`` contents digested in
``v3_pinned.json``.

A speed-up of the chip must not move a single op (docs/adr/0736); a deliberate change of
the v3 model regenerates the digests, and says why in its commit::

    python -m tests.record.machine.chip.test_v3_pinned

The digests are of the tables' contents (each column's values), not of the files' bytes:
Parquet stamps the pyarrow version into every file; byte identity across processes is
``tests/record/test_determinism.py``'s."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import kernbench as kb
from kernbench.kernels.golden import GOLDEN
from kernbench.kernels.registry import build_case
from kernbench.trace.hw import PRESETS
from tests.triton.conftest import GUARDS, KERNELS

PINNED = Path(__file__).with_name("v3_pinned.json")
V3 = PRESETS["ahbm-v3"]
#: the chip's paths: ready-first and in-order engines, blocking issue, a ring with no issue
#: port, the TCM ports without the HBM stack
HWS = {
    "v3": V3,
    "v3-in-order": dataclasses.replace(V3, name="v3-in-order", engine_arbitration="in_order"),
    "v3-blocking": dataclasses.replace(V3, name="v3-blocking", engine_issue="blocking"),
    "v3-ring": dataclasses.replace(V3, name="v3-ring", topology="ring", issue_ns=0),
    "v3-tcm": dataclasses.replace(V3, name="v3-tcm", hbm_total_gbps=0),
}
#: the built-in cases at their golden parameters
SMALL = dict(GOLDEN)
LARGER = {
    "softmax-resident": ("softmax", {"rows": 512, "programs": 256}),
    "stream-sum-16": ("stream-sum", {"programs": 16, "tiles": 8}),
    "gqa-decode-lazy": ("gqa-decode", {"S_kv": 1024, "T_kv": 128}),
    "ring-decode-512": ("ring-attention", {"phase": "decode", "S_kv_per_rank": 512}),
    "ring-prefill-4": ("ring-attention", {"n_ranks": 4, "S_kv_per_rank": 256}),
    "small-ops-300": ("small-ops", {"iters": 300}),
}


def _recordings() -> dict[str, Callable[[Path], kb.Trace]]:
    """Name -> a function recording it into a folder."""
    out: dict[str, Callable[[Path], kb.Trace]] = {}

    def builtin(case: str, params: dict[str, Any], hw: Any) -> Callable[[Path], kb.Trace]:
        return lambda folder: kb.record(build_case(case, params), folder / "t.ktrace", hw=hw)

    for hw_name, hw in HWS.items():
        cases = {**SMALL, **LARGER} if hw_name in ("v3", "v3-in-order") else SMALL
        for name, (case, params) in cases.items():
            out[f"{hw_name}/{name}"] = builtin(case, params, hw)
    for entry in KERNELS + GUARDS:
        def triton(folder: Path, entry: Any = entry) -> kb.Trace:
            factory = entry.factory()
            return kb.record(kb.build_case(entry.id, entry.params, factory=factory),
                             folder / "t.ktrace", hw=V3)
        out[f"v3/triton/{entry.id}"] = triton
    return out


RECORDINGS = _recordings()


def digest(trace: kb.Trace) -> dict[str, str | None]:
    """sha256 (16 hex digits) of the contents of ``ops.parquet`` and ``shared.parquet``
    (None: no such file), column by column."""
    out: dict[str, str | None] = {}
    for name in ("ops.parquet", "shared.parquet"):
        path = trace.path / name
        if not path.exists():
            out[name] = None
            continue
        h = hashlib.sha256()
        table = pq.read_table(path)
        for col in table.column_names:
            h.update(f"{col}={table.column(col).to_pylist()!r};".encode())
        out[name] = h.hexdigest()[:16]
    return out


def _pinned() -> dict[str, dict[str, str | None]]:
    return json.loads(PINNED.read_text())


def test_every_recording_is_pinned_and_every_pin_is_recorded() -> None:
    assert set(_pinned()) == set(RECORDINGS)


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_the_chip_records_the_pinned_ops_and_shared_waits(name: str, tmp_path: Path) -> None:
    trace = RECORDINGS[name](tmp_path)
    got = digest(trace)
    assert got["ops.parquet"] is not None
    assert got == _pinned()[name], (
        f"{name}: the chip's trace changed; a speed-up must not move an op (regenerate "
        "with python -m tests.record.machine.chip.test_v3_pinned only for a model change)")


def regenerate(folder: Path) -> dict[str, dict[str, str | None]]:
    got = {}
    for name, rec in sorted(RECORDINGS.items()):
        sub = folder / name.replace("/", "__")
        sub.mkdir(parents=True)
        got[name] = digest(rec(sub))
    return got


if __name__ == "__main__":  # pragma: no cover - the documented regeneration command
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        pins = regenerate(Path(tmp))
    PINNED.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(f"{len(pins)} recordings pinned in {PINNED}", file=sys.stderr)
