"""The kinds of case a sweep runs, by table (ADR-0930):

- ``kernel``: a built-in case name or a factory ``module:function``; a point is one launch,
  its folder ``points/<id>.ktrace`` one trace, sealed by its ``manifest.json``;
- ``workload``: a workload model (``llama3-70b``); a point is ``kb.Workload(model, phase,
  hw, **params).run(...)``, its folder ``points/<id>.workload`` the run's folder (a trace
  per launch, the verified slices, ``workload.json``), sealed by its ``workload.json``.

Each kind says how its parameters default (they enter the point id), how one point's
parameters are checked on its hardware before anything runs, what its point folders are
called, and which launch traces a folder holds (``check`` and ``sql`` over a sweep read
those).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.case import CaseFactory, factory_params
from kernbench.errors import BadInputError, closest
from kernbench.kernels.registry import registry
from kernbench.trace.hw import HwConfig
from kernbench.workload.model import MODELS, PHASES, POINT_PARAMS, point

KERNEL, WORKLOAD = "kernel", "workload"


def case_kind(case: str) -> str:
    """``workload`` for a workload model's name, else ``kernel``."""
    return WORKLOAD if case in MODELS else KERNEL


def resolve_factory(case: str) -> CaseFactory:
    """The factory of a built-in case name or of ``module:function``; BadInputError else."""
    if ":" in case:
        from kernbench.replay.verdict import load_factory

        return load_factory(case)
    reg = registry()
    if case not in reg:
        raise BadInputError(f"unknown case {case!r}{closest(case, reg)}; known: "
                            f"{', '.join(sorted(reg))}")
    return reg[case]


def _kernel_defaults(case: str) -> dict[str, Any]:
    return factory_params(resolve_factory(case))


def _workload_defaults(model: str) -> dict[str, Any]:
    """A workload point's parameters: its phase, batch, context, attention and the model's
    shape fields (each sweepable: a test sweeps a tiny model)."""
    return {"phase": PHASES[0], **POINT_PARAMS, **dataclasses.asdict(MODELS[model])}


def _workload_check(model: str, params: dict[str, Any], hw: HwConfig) -> None:
    """The point ``kb.Workload`` would refuse, refused before the sweep starts."""
    rest = dict(params)
    point(model, str(rest.pop("phase", PHASES[0])), rest, ranks=hw.n_pe)  # refuses a phase too


def _no_check(case: str, params: dict[str, Any], hw: HwConfig) -> None:
    """A kernel point's parameters are checked when it records (a failed point)."""


@dataclass(frozen=True)
class Kind:
    noun: str  # how errors name the case
    suffix: str  # a point's folder: points/<point_id><suffix>
    seal: str  # the file point.json holds the sha256 of
    seal_key: str  # its key in point.json
    defaults: Callable[[str], dict[str, Any]]
    check: Callable[[str, dict[str, Any], HwConfig], None]
    launches: Callable[[Path], dict[str, Path]]  # a point folder's traces, by launch name


KINDS: dict[str, Kind] = {
    KERNEL: Kind("case", ".ktrace", "manifest.json", "manifest_sha256", _kernel_defaults,
                 _no_check, lambda folder: {"": folder}),
    WORKLOAD: Kind("workload", ".workload", "workload.json", "workload_sha256",
                   _workload_defaults, _workload_check,
                   lambda folder: {p.name: p for p in sorted(folder.glob("*.ktrace"))}),
}


def kind_of(case: str) -> Kind:
    return KINDS[case_kind(case)]
