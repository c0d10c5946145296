"""``kernbench bench``: the performance harness (docs/performance.md). Figures, not timed tests.

Every section is imported here, statically: a section that cannot import fails the bench
(and this module's import), it is never skipped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.bench import (
    decode,
    fixed,
    record,
    replay,
    retime,
    serving,
    sweep,
    topology,
    triton_interpreter,
    workload,
)

#: the sections of the harness, each contributing keys to one flat JSON object
SECTIONS: list[tuple[str, Callable[..., dict[str, Any]]]] = [
    ("record", record.measure),
    ("replay", replay.measure),
    ("decode", decode.measure),
    ("ring decode on routed links", topology.measure),
    ("serving decode", serving.measure),
    ("sweep", sweep.measure),
    ("triton", triton_interpreter.measure),
    ("retime", retime.measure),
    ("llama3-70b decode layer", workload.measure),
    ("fixed costs", fixed.measure),
]


def run_bench(quick: bool = False, progress: Callable[[str], Any] | None = None
              ) -> dict[str, Any]:
    """Run every section, in order, into one flat dict."""
    result: dict[str, Any] = {}
    for label, fn in SECTIONS:
        if progress:
            progress(f"bench: {label} ...")
        result.update(fn(quick=quick))
    return result
