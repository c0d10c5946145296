"""Size limits checked before anything is allocated (ADR-0121).

One budget, ``KERNBENCH_MAX_MEMORY_GB`` (default 4), bounds what reading a trace may
allocate: the HBM tensors, the per-PE memories of the recorded hardware, the op log's rows
and the uncompressed size of every Parquet file. Exceeding it is a one-line
``TraceLimitError`` (exit 2) naming the value, the limit and the variable that raises it.
"""

from __future__ import annotations

import math
import os

from kernbench.errors import BadInputError, TraceFormatError

LIMIT_ENV = "KERNBENCH_MAX_MEMORY_GB"
DEFAULT_MAX_MEMORY_GB = 4.0
#: in-memory bytes one op-log row may take in an analysis (operands included), for the row cap
BYTES_PER_OP_ROW = 512
#: the largest manifest.json read (it holds only a few small fields)
MANIFEST_MAX_BYTES = 1 << 20
#: the most HBM tensors a trace may declare
MAX_TENSORS = 100_000
#: the most PEs a hardware config may have
MAX_N_PE = 4096
GIB = 1 << 30


class TraceLimitError(TraceFormatError):
    """A trace asks for more memory (or rows) than the configured limit allows."""


def max_memory_bytes() -> int:
    """The memory budget in bytes, from ``KERNBENCH_MAX_MEMORY_GB`` (a positive number)."""
    raw = os.environ.get(LIMIT_ENV)
    if raw is None or not raw.strip():
        return int(DEFAULT_MAX_MEMORY_GB * GIB)
    try:
        gb = float(raw)
    except ValueError:
        gb = math.nan
    if not math.isfinite(gb) or gb <= 0:
        raise BadInputError(f"{LIMIT_ENV}={raw!r} is not a positive number of GiB")
    return int(gb * GIB)


def _gib(n: float) -> str:
    return f"{n / GIB:.3g} GiB"


def require(what: str, need: float, limit: int | None = None) -> None:
    """Raise TraceLimitError if ``need`` bytes exceed the budget (or ``limit``)."""
    limit = max_memory_bytes() if limit is None else limit
    if not need <= limit:
        raise TraceLimitError(f"{what} needs {_gib(need)}, over the {_gib(limit)} limit "
                              f"(set {LIMIT_ENV} to raise it)")


def max_op_rows() -> int:
    """The most op-log rows an analysis may load under the budget."""
    return max_memory_bytes() // BYTES_PER_OP_ROW


def require_rows(what: str, rows: int) -> None:
    cap = max_op_rows()
    if rows > cap:
        raise TraceLimitError(f"{what} has {rows:,} rows, over the {cap:,}-row limit of "
                              f"{_gib(max_memory_bytes())} (set {LIMIT_ENV} to raise it)")
