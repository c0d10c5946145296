"""The points of a sweep: the spec's grid x zip x hardware, in one fixed order, each named by
a stable id (a hash of the case, its full parameters and the full hardware config)."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kernbench.errors import BadInputError, closest
from kernbench.sweep.kinds import kind_of, resolve_factory
from kernbench.sweep.spec import Scalar, SweepSpec
from kernbench.trace.hw import HwConfig, default_hw, load_hw

ID_CHARS = 16


@dataclass(frozen=True)
class Point:
    """One point: its index in spec order, its id, the values of the swept columns, and
    everything a worker needs (plain data only)."""

    index: int
    point_id: str
    columns: tuple[tuple[str, Scalar], ...]  # swept params, then hw.* columns
    params: tuple[tuple[str, Scalar], ...]  # the swept params passed to the factory
    hw: tuple[tuple[str, Any], ...]  # the full HwConfig as (field, value)

    @property
    def hw_dict(self) -> dict[str, Any]:
        return dict(self.hw)


def validate(spec: SweepSpec) -> dict[str, Any]:
    """Check the case (or workload model) exists and knows every swept parameter; its
    defaults."""
    kind = kind_of(spec.case)
    defaults = kind.defaults(spec.case)
    unknown = sorted(set(spec.swept) - set(defaults))
    if unknown:
        raise BadInputError(f"{kind.noun} {spec.case!r} has no parameter(s) {unknown}"
                            f"{closest(unknown[0], defaults)}; known: {sorted(defaults)}")
    return defaults


def point_id(case: str, params: dict[str, Any], hw: dict[str, Any]) -> str:
    """A stable hash of the case, its full parameters and the full hardware config."""
    body = json.dumps({"case": case, "params": params, "hw": hw}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:ID_CHARS]


def _product(axes: tuple[tuple[str, tuple[Scalar, ...]], ...]) -> list[dict[str, Scalar]]:
    names = [k for k, _ in axes]
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(v for _, v in axes))]


def _zipped(spec: SweepSpec) -> list[dict[str, Scalar]]:
    if not spec.zip:
        return [{}]
    n = len(spec.zip[0][1])
    return [{k: v[i] for k, v in spec.zip} for i in range(n)]


def _hardware(spec: SweepSpec) -> list[tuple[dict[str, Scalar], HwConfig]]:
    """(hw columns, config) for every hardware combination."""
    out = []
    for preset in spec.presets or (default_hw(),):
        for fields in _product(spec.hw):
            cols: dict[str, Scalar] = {"hw.preset": preset} if spec.presets else {}
            cols.update({f"hw.{k}": v for k, v in fields.items()})
            base = load_hw(preset).to_dict()
            base.update(fields)
            out.append((cols, HwConfig(**base)))
    return out


def expand(spec: SweepSpec, defaults: dict[str, Any] | None = None) -> Iterator[Point]:
    """Every point of ``spec`` in spec order: grid (first key outermost), zip, presets,
    hw fields. ``defaults`` (the factory's) enter the id so a changed default is a new point."""
    defaults = validate(spec) if defaults is None else defaults
    check = kind_of(spec.case).check
    hardware = _hardware(spec)
    index = 0
    for g in _product(spec.grid):
        for z in _zipped(spec):
            params = {**g, **z}
            for cols, hw in hardware:
                full = {**defaults, **params}
                check(spec.case, full, hw)
                pid = point_id(spec.case, full, hw.to_dict())
                yield Point(index, pid, tuple({**params, **cols}.items()),
                            tuple(params.items()), tuple(hw.to_dict().items()))
                index += 1


__all__ = ["Point", "expand", "point_id", "resolve_factory", "validate"]
