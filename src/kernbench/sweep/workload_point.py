"""One workload point of a sweep (ADR-0930): ``kb.Workload(model, phase, hw, **params)
.run(folder, verify=<the replay stage>, like=<the folder of the point that ran the same
workload on other hardware>)``, and the workload's answer as the point's row.

The row's metrics are the answer's (``workload.json``): ``latency_ps`` (the layer's, so the
sweep's default ``[best]`` and ``diff`` read it), ``layer_s``, ``head_s``, ``token_s``,
``tokens_per_s``, ``floor_layer_s`` (decode) or ``ttft_s`` (prefill), the binding kernel
(the layer's longest) and what binds it, ``verified``, and how many of its launches were
retimed and how many recorded. ``replay_ok`` is ``verified`` when the replay stage ran;
``check_ok`` is every verified slice's check and, with the check stage, every launch's
(with the sweep's rules).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def answer_columns(body: dict[str, Any], retimed: set[str], recorded: set[str]
                   ) -> dict[str, Any]:
    """The points-table columns of a workload's answer (``workload.json``'s body) and of
    its launches' traces, the retimed and the recorded ones (by folder name)."""
    layer = [r for r in body["rows"] if r["scope"] == "layer"]
    top = max(layer, key=lambda r: r["latency_ps"])  # the first of the longest
    out: dict[str, Any] = {
        "latency_ps": sum(r["latency_ps"] for r in layer),
        "layer_s": body["layer_s"], "head_s": body["head_s"], "token_s": body["token_s"],
        "tokens_per_s": body["tokens_per_s"]}
    for key in ("floor_layer_s", "ttft_s"):  # the one the phase has
        if key in body:
            out[key] = body[key]
    out.update(binding_kernel=top["name"], binding_part=top["binding"],
               verified=body["verified"], launches=len(retimed | recorded),
               launches_retimed=len(retimed), launches_recorded=len(recorded))
    return out


def _check(out: Path, rules: Any) -> tuple[bool, str | None]:
    """Every launch's invariants (and the sweep's ``rules``): (ok, what failed, by launch)."""
    from kernbench.analyze import check

    failed = []
    for trace in sorted(out.glob("*.ktrace")):
        report = check(trace, rules=rules)
        if not report.ok:
            failed.append(f"{trace.stem}: {', '.join(report.violated())}")
    return not failed, "; ".join(failed) or None


def run_workload_point(task: dict[str, Any], out: Path, row: dict[str, Any],
                       source: Path | None, pool: Callable[[], Any],
                       rules: Callable[[dict[str, Any]], Any]) -> None:
    """Run the workload point ``task`` into the folder ``out`` (retimed ``like=source``
    where a launch is the same there) and fill ``row``; ``pool()``: the worker's replay
    pool, when the replay stage verifies; ``rules(task)``: the sweep's check rules."""
    from kernbench.trace.hw import HwConfig
    from kernbench.workload import Workload

    params = dict(task["params"])
    phase = str(params.pop("phase", "decode"))
    work = Workload(task["case"], phase=phase, hw=HwConfig(**task["hw"]), **params)
    verify = bool(task["replay"])
    result = work.run(out, verify=verify, pool=pool() if verify else None, like=source,
                      origin=task.get("source_name") if source is not None else None)
    body = json.loads((out / "workload.json").read_text())  # the answer, as stored
    retimed = {r.trace for r in result.rows if r.retimed}
    recorded = {r.trace for r in result.rows if not r.retimed}
    row["metrics"] = answer_columns(body, retimed, recorded)
    timings = result.timings()
    row["record_wall_s"], row["replay_wall_s"] = timings["record_s"], timings["replay_s"]
    if verify:
        row["replay_ok"] = bool(body["verified"])
        row["check_ok"] = all(r.check_ok for r in result.rows)
    if task["check"]:
        ok, row["check_violations"] = _check(out, rules(task))
        row["check_ok"] = ok and row["check_ok"] is not False
    if retimed:
        row["retimed_from"] = task["source_id"]
