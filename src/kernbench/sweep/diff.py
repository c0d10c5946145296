"""``kernbench diff SWEEP_A SWEEP_B``: two sweeps compared point by point.

Points pair by point id (the same case, parameters and hardware: ``pair="id"``), or, with
``pair="params"``, by case and swept parameters whatever the hardware (one design on two
machines; each side must then hold one point per parameter combination). ``--fail-on``
thresholds apply to every pair. A gate that compared nothing fails: with ``--fail-on``
given and no pair carrying both values, the report is one line and exit 1 (ADR-0810).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.diff import Threshold
from kernbench.analyze.metrics import resolve_metric
from kernbench.analyze.report import format_table, to_json
from kernbench.errors import BadInputError
from kernbench.sweep.report import load_sweep
from kernbench.sweep.spec import SweepSpec

#: how points of the two sweeps pair up
PAIRINGS = ("id", "params")


def _label(row: dict[str, Any], names: Sequence[str]) -> str:
    return " ".join(f"{n}={row[n]}" for n in names if n in row)


@dataclass(frozen=True)
class SweepDiffReport:
    a: str
    b: str
    rows: list[dict[str, Any]]  # per pair: ids, params, metric a/b/change
    only_a: list[str]
    only_b: list[str]
    exceeded: list[str]  # "point_id: threshold (a -> b)"
    metrics: list[str]
    fail_on: tuple[str, ...] = ()  # the thresholds as given
    compared: int = 0  # pairs a threshold was evaluated on
    pair: str = "id"
    hint: str = ""  # why nothing paired, and what would pair

    @property
    def nothing_compared(self) -> bool:
        """``--fail-on`` was given and no pair was compared: the gate cannot pass."""
        return bool(self.fail_on) and self.compared == 0

    @property
    def exit_code(self) -> int:
        return 1 if self.exceeded or self.nothing_compared else 0

    def _counts(self) -> str:
        return (f"{len(self.rows)} common points, {len(self.only_a)} only in A, "
                f"{len(self.only_b)} only in B")

    def to_text(self) -> str:
        if self.nothing_compared:
            return (f"diff {self.a} -> {self.b}: FAIL: --fail-on {', '.join(self.fail_on)} "
                    f"compared nothing ({self._counts()}){self.hint}\n")
        parts = [f"diff {self.a} -> {self.b}: {self._counts()}"
                 + (" (paired by case and parameters)" if self.pair == "params" else "")]
        if self.rows:
            headers = list(self.rows[0])
            parts.append(format_table(headers, [list(r.values()) for r in self.rows]))
        for label, ids in (("only in A", self.only_a), ("only in B", self.only_b)):
            if ids:
                parts.append(f"{label}: {', '.join(ids)}")
        if self.exceeded:
            parts.append("fail-on exceeded:\n" + "\n".join(f"  {e}" for e in self.exceeded))
        if not self.rows and self.hint:
            parts.append(self.hint.removeprefix("; "))
        return "\n\n".join(parts) + "\n"

    def to_json(self) -> str:
        return to_json(self.__dict__ | {"exit_code": self.exit_code,
                                        "nothing_compared": self.nothing_compared})


def _param_keys(spec: SweepSpec, points: pl.DataFrame, side: str) -> dict[tuple, str]:
    """Point id by (case, swept parameter values); BadInputError when two points of one
    sweep share them (they differ in hardware only)."""
    names = ["case", *spec.swept]
    keys: dict[tuple, str] = {}
    for row in points.iter_rows(named=True):
        key = tuple(row[n] for n in names)
        if key in keys:
            raise BadInputError(
                f"--pair params: sweep {side} has several points with "
                f"{_label(row, names)} (they differ in {', '.join(spec.hw_columns)}); "
                "pair by id, or diff sweeps of one hardware each")
        keys[key] = row["point_id"]
    return keys


def _pairs(spec_a: SweepSpec, pa_: pl.DataFrame, spec_b: SweepSpec, pb: pl.DataFrame,
           pair: str) -> list[tuple[str, str]]:
    """(point id in A, point id in B) of every pair, in A's order."""
    if pair == "id":
        ids_b = set(pb["point_id"])
        return [(i, i) for i in pa_["point_id"] if i in ids_b]
    if set(spec_a.swept) != set(spec_b.swept):
        raise BadInputError(f"--pair params: the sweeps vary other parameters (A: "
                            f"{list(spec_a.swept)}, B: {list(spec_b.swept)})")
    ka, kb = _param_keys(spec_a, pa_, "A"), _param_keys(spec_b, pb, "B")
    return [(ida, kb[key]) for key, ida in ka.items() if key in kb]


def _hint(spec_a: SweepSpec, pa_: pl.DataFrame, spec_b: SweepSpec, pb: pl.DataFrame,
          pair: str) -> str:
    """Why no point paired by id, and whether pairing by parameters would pair some."""
    if pair != "id":
        return ""
    if spec_a.case != spec_b.case:
        return f"; the sweeps are of different cases ({spec_a.case!r} and {spec_b.case!r})"
    hw = sorted(set(spec_a.hw_columns) ^ set(spec_b.hw_columns)) or sorted(
        set(spec_a.hw_columns) | set(spec_b.hw_columns))
    try:
        n = len(_pairs(spec_a, pa_, spec_b, pb, "params"))
    except BadInputError:
        n = 0
    if not n:
        return ""
    return (f"; no point has the same hardware in both (they differ in "
            f"{', '.join(hw) or 'hardware'}): --pair params pairs {n} points by case and "
            "parameters")


def sweep_diff(a: str | Path, b: str | Path, fail_on: Sequence[str] = (), pair: str = "id"
               ) -> SweepDiffReport:
    """Compare sweep ``a`` (before) with sweep ``b`` (after), pair by pair."""
    if pair not in PAIRINGS:
        raise BadInputError(f"--pair {pair!r}: expected one of {', '.join(PAIRINGS)}")
    spec, pa_ = load_sweep(a)
    spec_b, pb = load_sweep(b)
    thresholds = [Threshold.parse(f) for f in fail_on]
    common_cols = [c for c in pa_.columns if c in pb.columns]
    # a sweep whose every point failed has no metric columns: nothing to compare, not a typo
    measured = any((p["status"] == "ok").any() for p in (pa_, pb))
    keys: list[str] = []
    for t in thresholds:
        try:
            keys.append(resolve_metric(t.key, common_cols))
        except KeyError as exc:
            if measured:
                raise BadInputError(f"--fail-on {t}: {exc.args[0]}") from None
            keys.append(t.key)
            continue
        t.check_unit(keys[-1], str(t))
    shown = [k for k in dict.fromkeys(["latency_ps", *keys]) if k in common_cols]
    names = [*spec.swept, *spec.hw_columns]
    pairs = _pairs(spec, pa_, spec_b, pb, pair)
    ra_ = {r["point_id"]: r for r in pa_.iter_rows(named=True)}
    rb = {r["point_id"]: r for r in pb.iter_rows(named=True)}
    rows, exceeded, compared = [], [], 0
    for ida, idb in pairs:
        ra, other = ra_[ida], rb[idb]
        pid = ida if ida == idb else f"{ida}->{idb}"
        row: dict[str, Any] = {"point_id": pid, "params": _label(ra, names),
                               "status": f"{ra['status']}->{other['status']}"}
        for k in shown:
            va, vb = ra.get(k), other.get(k)
            row[f"{k} a"], row[f"{k} b"] = va, vb
            row[f"{k} %"] = (None if va is None or vb is None or not va
                             else round((vb - va) / abs(va) * 100, 4))
        seen = False
        for t, k in zip(thresholds, keys, strict=True):
            va, vb = ra.get(k), other.get(k)
            if va is None or vb is None:
                if ra["status"] == "ok" and other["status"] != "ok":
                    exceeded.append(f"{pid} ({row['params']}): failed in B")
                    seen = True
                continue
            seen = True
            if t.exceeded(float(va), float(vb)):
                exceeded.append(f"{pid} ({row['params']}): {t} ({k} {va} -> {vb})")
        compared += seen
        rows.append(row)
    paired_a, paired_b = {p[0] for p in pairs}, {p[1] for p in pairs}
    return SweepDiffReport(
        str(a), str(b), rows, sorted(set(ra_) - paired_a), sorted(set(rb) - paired_b),
        list(dict.fromkeys(exceeded)), shown, tuple(map(str, thresholds)), compared, pair,
        "" if pairs else _hint(spec, pa_, spec_b, pb, pair))
