"""The fuzz cases run as subprocesses under a memory cap (RLIMIT_AS 2 GiB) and a time cap:
size bombs behind a valid hash are refused up front with one line, exit 2.

polars and Arrow reserve address space per thread and per allocator arena, so the child
runs with ``POLARS_MAX_THREADS=2`` and Arrow's system allocator to fit a 2 GiB address
space at all; the good trace is checked under the same cap as the baseline.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .corrupt import KINDS, OPS, restamp

GOOD = Path(__file__).parents[2] / "traces" / "softmax.ktrace"
CAP = 2 << 30
TIME_CAP_S = 60


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run_capped(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "POLARS_MAX_THREADS": "2", "ARROW_DEFAULT_MEMORY_POOL": "system",
            **(env or {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          preexec_fn=_cap, timeout=TIME_CAP_S, env=full)


def _row_bomb(d: Path) -> None:
    """A 1M-row op log (the good one repeated) behind a manifest that says 80 ops."""
    t = pq.read_table(d / OPS)
    pq.write_table(pa.concat_tables([t] * 12_500), d / OPS, row_group_size=1 << 20)


BOMBS = {"tensors_shape_bomb": KINDS["tensors_shape_bomb"][0],
         "manifest_scratch_bomb": KINDS["manifest_scratch_bomb"][0],
         "ops_row_bomb": _row_bomb}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bombs")
    out = {}
    for name, edit in BOMBS.items():
        d = root / f"{name}.ktrace"
        shutil.copytree(GOOD, d)
        edit(d)
        restamp(d)
        out[name] = d
    return out


def test_trust_10_good_trace_fits_the_memory_cap() -> None:
    p = run_capped("-m", "kernbench.cli", "check", str(GOOD))
    assert p.returncode == 0 and ": ok" in p.stdout, p.stderr[-500:]


@pytest.mark.parametrize("entry", [("kernbench.cli", "check"), ("kernbench.replay",)],
                         ids=["check", "replay"])
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_trust_10_bombs_refused_under_memory_and_time_cap(bombs, bomb: str,
                                                          entry: tuple[str, ...]) -> None:
    p = run_capped("-m", *entry, str(bombs[bomb]))
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr[-800:]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-800:]
    want = "rows but the manifest says n_ops = 80" if bomb == "ops_row_bomb" else (
        "over the 4 GiB limit (set KERNBENCH_MAX_MEMORY_GB to raise it)")
    assert want in lines[0]


def test_trust_9_sql_url_refused_without_network_under_time_cap() -> None:
    """polars would retry the URL for seconds while planning; the guard refuses first."""
    p = run_capped("-m", "kernbench.cli", "sql", str(GOOD),
                   "SELECT * FROM read_parquet('http://127.0.0.1:9/x.parquet')")
    assert p.returncode == 2 and "'read_parquet' reads files or URLs" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
