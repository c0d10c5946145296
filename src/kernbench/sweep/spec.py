"""The sweep spec (TOML): a case, a ``[grid]`` product, ``[zip]`` lists that vary together,
hardware presets and field overrides (``[hw]``), the stages per point (``[stages]``) and how
to pick the best point (``[best]``). ``docs/sweeps.md`` is the reference.

A spec is plain data: parsing one never runs code. The spec as run is written back into the
sweep directory in one canonical form (``to_toml``), so two specs are the same sweep exactly
when their canonical texts are equal.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.case.params import parse_value
from kernbench.errors import BadInputError, closest
from kernbench.trace.hw import CHOICES, PRESETS, HwConfig
from kernbench.trace.tomlfile import read_toml

Scalar = int | float | str | bool
Axis = tuple[str, tuple[Scalar, ...]]

_TOP = frozenset({"case", "grid", "zip", "hw", "stages", "best"})
_STAGES = frozenset({"record", "replay", "check", "rules"})
_BEST = frozenset({"metric", "per"})
HW_FIELDS = tuple(f.name for f in dataclasses.fields(HwConfig) if f.name != "name")
#: hw fields whose values are text, each from its list (``engine_issue``: blocking or async,
#: ``engine_arbitration``, ``topology``)
TEXT_FIELDS = CHOICES
#: columns of points.parquet a swept parameter may not be named
RESERVED = frozenset({"point_id", "case", "status", "error", "replay_ok", "check_ok",
                      "check_violations", "wall_s", "record_wall_s", "replay_wall_s",
                      "replay_max_abs_err", "retimed_from"})


@dataclass(frozen=True)
class SweepSpec:
    """One sweep: every point is ``case`` at one combination of grid x zip x hardware."""

    case: str
    grid: tuple[Axis, ...] = ()
    zip: tuple[Axis, ...] = ()
    presets: tuple[str, ...] = ()  # empty: the default preset, not a column
    hw: tuple[Axis, ...] = ()  # hw field overrides, a product
    replay: bool = False
    check: bool = False
    rules_text: str | None = None  # the rules file's content (copied into the sweep)
    best_metric: str = "latency_ps"
    best_per: tuple[str, ...] = ()

    @property
    def swept(self) -> tuple[str, ...]:
        """The parameter names that are columns of points.parquet, in spec order."""
        return tuple(k for k, _ in self.grid) + tuple(k for k, _ in self.zip)

    @property
    def hw_columns(self) -> tuple[str, ...]:
        return (("hw.preset",) if self.presets else ()) + tuple(f"hw.{k}" for k, _ in self.hw)

    def n_points(self) -> int:
        n = math.prod(len(v) for _, v in self.grid) * math.prod(len(v) for _, v in self.hw)
        n *= max(1, len(self.presets))
        return n * (len(self.zip[0][1]) if self.zip else 1)

    def to_toml(self) -> str:
        """The canonical TOML text of this spec (rules refer to ``rules.toml`` beside it)."""
        lines = [f"case = {_toml(self.case)}"]
        for title, axes in (("grid", self.grid), ("zip", self.zip)):
            if axes:
                lines += ["", f"[{title}]"] + [f"{_key(k)} = {_toml(list(v))}" for k, v in axes]
        if self.presets or self.hw:
            lines += ["", "[hw]"]
            if self.presets:
                lines.append(f"preset = {_toml(list(self.presets))}")
            lines += [f"{_key(k)} = {_toml(list(v))}" for k, v in self.hw]
        lines += ["", "[stages]", "record = true", f"replay = {_toml(self.replay)}",
                  f"check = {_toml(self.check)}"]
        if self.rules_text is not None:
            lines.append('rules = "rules.toml"')
        lines += ["", "[best]", f"metric = {_toml(self.best_metric)}",
                  f"per = {_toml(list(self.best_per))}"]
        return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise BadInputError(f"sweep spec: cannot write {value!r}")  # pragma: no cover


def _key(key: str) -> str:
    return key if key.replace("_", "a").replace("-", "a").isalnum() else json.dumps(key)


def _values(where: str, value: Any, distinct: bool = True) -> tuple[Scalar, ...]:
    """A list of scalars (a lone scalar is a list of one)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise BadInputError(f"{where}: an empty list of values")
    for v in items:
        if not isinstance(v, int | float | str | bool):
            raise BadInputError(f"{where}: value {v!r} is not a number, string or bool")
        if isinstance(v, float) and not math.isfinite(v):
            raise BadInputError(f"{where}: value {v!r} is not finite")
    if distinct and len(set(map(repr, items))) != len(items):
        raise BadInputError(f"{where}: repeated values in {items!r}")
    return tuple(items)


def _axes(where: str, table: Any) -> tuple[Axis, ...]:
    if not isinstance(table, dict):
        raise BadInputError(f"{where}: expected a table of KEY = [values], got {table!r}")
    axes = tuple((k, _values(f"{where}.{k}", v, distinct=where != "zip"))
                 for k, v in table.items())
    if where == "zip" and axes:
        rows = list(zip(*([repr(x) for x in v] for _, v in axes), strict=False))
        if len(set(rows)) != len(rows):
            raise BadInputError("zip: repeated combinations of values")
    return axes


def _table(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise BadInputError(f"sweep spec: [{key}] must be a table, got {value!r}")
    return dict(value)


def _stages(data: Mapping[str, Any], base: Path | None) -> tuple[bool, bool, str | None]:
    stages = _table(data, "stages")
    unknown = sorted(set(stages) - _STAGES)
    if unknown:
        raise BadInputError(f"sweep spec: unknown [stages] keys {unknown}"
                            f"{closest(unknown[0], sorted(_STAGES))}; known: {sorted(_STAGES)}")
    for flag in ("record", "replay", "check"):
        if not isinstance(stages.get(flag, False), bool):
            raise BadInputError(f"sweep spec: stages.{flag} must be true or false")
    if stages.get("record", True) is not True:
        raise BadInputError("sweep spec: stages.record cannot be false (every point records)")
    rules = stages.get("rules")
    text = None if rules is None else read_rules(rules, base)
    return bool(stages.get("replay", False)), bool(stages.get("check", False)), text


def read_rules(path: Any, base: Path | None = None) -> str:
    """The text of a rules file (relative to ``base``), validated as rules."""
    from kernbench.analyze.thresholds import parse_rules

    if not isinstance(path, str | Path):
        raise BadInputError(f"sweep spec: rules must be a file path, got {path!r}")
    full = Path(path) if base is None or Path(path).is_absolute() else base / path
    try:
        text = full.read_text()
        parse_rules(tomllib.loads(text), str(full))
    except OSError as exc:
        raise BadInputError(f"rules file {str(full)!r}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInputError(f"rules file {str(full)!r} is not valid TOML: {exc}") from None
    return text


def parse_spec(data: Mapping[str, Any], base: Path | None = None) -> SweepSpec:
    """A SweepSpec from a parsed TOML document (``base``: where relative paths start)."""
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise BadInputError(f"sweep spec: unknown keys {unknown}{closest(unknown[0], sorted(_TOP))}"
                            f"; known: {sorted(_TOP)}")
    case = data.get("case")
    if not isinstance(case, str) or not case:
        raise BadInputError(f"sweep spec: case must be a case name or module:function, "
                            f"got {case!r}")
    grid, zipped = _axes("grid", _table(data, "grid")), _axes("zip", _table(data, "zip"))
    lengths = {k: len(v) for k, v in zipped}
    if len(set(lengths.values())) > 1:
        raise BadInputError(f"sweep spec: [zip] lists must have one length, got {lengths}")
    hw_table = _table(data, "hw")
    presets = _values("hw.preset", hw_table.pop("preset")) if "preset" in hw_table else ()
    for p in presets:
        if p not in PRESETS:
            raise BadInputError(f"sweep spec: unknown hw preset {p!r}{closest(str(p), PRESETS)}; "
                                f"known: {sorted(PRESETS)}")
    hw = _axes("hw", hw_table)
    for k, values in hw:
        if k not in HW_FIELDS:
            raise BadInputError(f"sweep spec: unknown hw field {k!r}{closest(k, HW_FIELDS)}; "
                                f"known: {list(HW_FIELDS)}")
        if k in TEXT_FIELDS:  # a policy or topology name
            bad = [v for v in values if v not in TEXT_FIELDS[k]]
            if bad:
                raise BadInputError(f"sweep spec: hw.{k} values must be in {TEXT_FIELDS[k]}, "
                                    f"got {bad}{closest(str(bad[0]), TEXT_FIELDS[k])}")
        elif any(isinstance(v, bool | str) for v in values):
            raise BadInputError(f"sweep spec: hw.{k} values must be numbers, got {list(values)}")
    names = [k for k, _ in grid] + [k for k, _ in zipped]
    twice = sorted({k for k in names if names.count(k) > 1})
    if twice:
        raise BadInputError(f"sweep spec: parameters {twice} appear in both [grid] and [zip]")
    clash = sorted(set(names) & RESERVED)
    if clash:
        raise BadInputError(f"sweep spec: parameter names {clash} are reserved column names")
    replay, check, rules_text = _stages(data, base)
    best = _table(data, "best")
    if sorted(set(best) - _BEST):
        extra = sorted(set(best) - _BEST)
        raise BadInputError(f"sweep spec: unknown [best] keys {extra}"
                            f"{closest(extra[0], sorted(_BEST))}")
    metric = best.get("metric", "latency_ps")
    per = best.get("per", [])
    if not isinstance(metric, str) or not isinstance(per, list) or not all(
            isinstance(p, str) and p in names for p in per):
        raise BadInputError(f"sweep spec: [best] needs metric = NAME and per = [swept "
                            f"parameters], got metric={metric!r} per={per!r}")
    return SweepSpec(case, grid, zipped, tuple(str(p) for p in presets), hw, replay, check,
                     rules_text, metric, tuple(per))


def load_spec_file(path: str | Path) -> SweepSpec:
    """A SweepSpec from a TOML file; BadInputError naming the file otherwise."""
    path = Path(path)
    data = read_toml(path, "sweep spec")
    return parse_spec(data, base=path.parent)


def parse_axis_options(items: Sequence[str]) -> dict[str, list[Scalar]]:
    """``["S_kv=4096,32768", "hw.hbm_gbps=128,256"]`` -> ``{"S_kv": [4096, 32768], ...}``."""
    out: dict[str, list[Scalar]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        name = key.removeprefix("hw.")
        if not sep or not name.isidentifier() or not values.strip():
            raise BadInputError(f"parameter {item!r} is not KEY=V1,V2,...")
        out[key] = [parse_value(v.strip()) for v in values.split(",")]
    return out


def with_overrides(data: dict[str, Any], params: Sequence[str]) -> dict[str, Any]:
    """A parsed spec document with ``-p`` axes merged in (``hw.X`` into [hw], else [grid])."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for key, values in parse_axis_options(params).items():
        if key.startswith("hw."):
            data.setdefault("hw", {})[key.removeprefix("hw.")] = values
        else:
            if isinstance(data.get("zip"), dict):
                data["zip"].pop(key, None)
            data.setdefault("grid", {})[key] = values
    return data
