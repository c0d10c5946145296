"""Does a case rebuilt for the reference match the one the trace recorded?

Compared: the kernel (``module:qualname``), its params, the grid, and every HBM tensor in
order (name, shape, dtype, role, init). ``kb.data`` bytes are not compared: the reference is
called with the trace's own initial arrays.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kernbench.case import Case, kernel_name


def _norm(value: Any) -> Any:
    """JSON round trip, so tuples compare as lists and values as the manifest holds them."""
    try:
        return json.loads(json.dumps(value, sort_keys=True))
    except (TypeError, ValueError):
        return repr(value)


def _init(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def recorded_signature(manifest: Mapping[str, Any],
                       tensor_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "kernel": manifest.get("kernel"),
        "params": _norm(manifest.get("params")),
        "grid": _norm(manifest.get("grid")),
        "tensors": [{"name": r.get("name"), "shape": _norm(r.get("shape")),
                     "dtype": r.get("dtype"), "role": r.get("role"),
                     "init": _init(r.get("init"))} for r in tensor_rows],
    }


def case_signature(case: Case) -> dict[str, Any]:
    return {
        "kernel": kernel_name(case.kernel),
        "params": _norm(dict(case.params)),
        "grid": _norm([int(g) for g in case.grid]),
        "tensors": [{"name": n, "shape": _norm(list(t.shape)), "dtype": t.dtype.name,
                     "role": t.role, "init": _init(t.init.to_json())}
                    for n, t in case.tensors.items()],
    }


def differences(recorded: Mapping[str, Any], rebuilt: Mapping[str, Any]) -> list[str]:
    """What differs, each as ``what: recorded X, rebuilt Y`` (empty when they match)."""
    out = []
    for key in ("kernel", "params", "grid"):
        if recorded[key] != rebuilt[key]:
            out.append(f"{key}: recorded {recorded[key]!r}, rebuilt {rebuilt[key]!r}")
    rec = {t["name"]: t for t in recorded["tensors"]}
    new = {t["name"]: t for t in rebuilt["tensors"]}
    if list(rec) != list(new):
        out.append(f"tensors: recorded {list(rec)}, rebuilt {list(new)}")
    for name in (n for n in rec if n in new):
        for field in ("shape", "dtype", "role", "init"):
            if rec[name][field] != new[name][field]:
                out.append(f"tensor {name} {field}: recorded {rec[name][field]!r}, rebuilt "
                           f"{new[name][field]!r}")
    return out


def mismatch(manifest: Mapping[str, Any], tensor_rows: Sequence[Mapping[str, Any]],
             case: Case, limit: int = 8) -> list[str]:
    """The differences, at most ``limit`` of them (then how many more)."""
    found = differences(recorded_signature(manifest, tensor_rows), case_signature(case))
    if len(found) > limit:
        found = [*found[:limit], f"and {len(found) - limit} more"]
    return found
