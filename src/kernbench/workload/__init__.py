"""Workloads: a model's layer as the kernels it launches, recorded in order on one hardware
configuration (``kb.Workload``; docs/llama3-70b.md)."""

from __future__ import annotations

from kernbench.workload.result import Row, WorkloadResult
from kernbench.workload.workload import Workload

__all__ = ["Workload", "WorkloadResult", "Row"]
