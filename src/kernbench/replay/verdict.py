"""The reference, dtype-aware comparison, and ``verdict.json``.

The reference comes from the built-in case registry (looked up by the manifest's ``case``
name in a fixed dict) or from a factory the user names; never from a module named in the
trace. It is called with the trace's initial input/inout arrays.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernbench.case import Case, CaseFactory
from kernbench.case.factory import SPEC_RE, factory_spec, load_factory
from kernbench.case.references import BUILTIN_KERNELS, REFERENCES
from kernbench.errors import BadInputError
from kernbench.replay.convert import BF16, to_f32
from kernbench.replay.match import mismatch
from kernbench.schemas.dtypes import DTYPES

__all__ = ["Reference", "Tolerance", "TOLERANCES", "resolve_reference", "expected_outputs",
           "reference_inputs",
           "compare", "check_outputs", "case_hint", "factory_spec", "load_factory"]


@dataclass(frozen=True)
class Tolerance:
    """``|actual - expected| <= atol * scale + rtol * |expected|`` elementwise, where
    ``scale = max(1, max |expected|)`` (so a GEMM's near-zero entries are judged against the
    output's magnitude, not their own). NaN equals NaN; infinities must match exactly."""

    rtol: float
    atol: float


#: by output dtype: a few ulps of the dtype, floor for values near zero
TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(rtol=1e-4, atol=1e-5),
    "float16": Tolerance(rtol=2e-3, atol=1e-3),
    "bfloat16": Tolerance(rtol=1.6e-2, atol=2.0**-7),  # one bf16 ulp at the output scale
    # every integer and bool dtype of the format compares exactly
    **{name: Tolerance(0.0, 0.0) for name, d in DTYPES.items() if not d.is_float},
}


@dataclass(frozen=True)
class Reference:
    """Where expected outputs come from; ``fn`` None means there is no reference."""

    label: str | None
    fn: Callable[..., Mapping[str, Any]] | None
    note: str | None = None
    #: the reference takes bfloat16 inputs as float32 arrays of the same values (the
    #: built-in references, which compute in float32); otherwise as ``ml_dtypes.bfloat16``
    float32_inputs: bool = False


def _accepted(factory: CaseFactory, params: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded params the factory takes (all of them if it takes ``**kwargs``)."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return dict(params)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return dict(params)
    return {k: v for k, v in params.items() if k in sig.parameters}


def _build(factory: CaseFactory, params: Mapping[str, Any] | None, what: str) -> Case:
    try:
        case = factory(**_accepted(factory, params)) if params is not None else factory()
    except BadInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code; report it as bad input in one line
        raise BadInputError(f"{what}: building the case failed: {type(exc).__name__}: {exc}"
                            ) from None
    if not isinstance(case, Case):
        raise BadInputError(f"{what} returned {type(case).__name__}, not a kernbench Case")
    return case


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"


def case_hint(manifest: Mapping[str, Any]) -> str:
    """Which ``--case`` to pass: the recorded factory spec (quoted as data, never imported)."""
    spec = manifest.get("factory")
    if isinstance(spec, str) and len(spec) <= 200 and SPEC_RE.match(spec):
        return f"pass --case {spec} to check against its reference"
    return "pass --case MODULE:FUNC to check against a reference"


def resolve_reference(manifest: Mapping[str, Any], case: str | Case | Callable[..., Any] | None,
                      tensor_rows: Sequence[Mapping[str, Any]] | None = None,
                      case_paths: Sequence[str] = ()) -> Reference:
    """The reference for a trace: the given case, the named factory, else the built-in case
    of that name.

    A factory is built with the recorded params it takes (the factory's ``case_params``,
    else the kernel's params); a ``Case`` is taken as it is. With ``tensor_rows`` the case
    must match the recorded one (BadInputError saying what differs). The built-in registry
    is consulted only for a case not recorded as a user factory's, and only when the
    recorded kernel is the built-in's.
    """
    params = manifest.get("case_params")
    if params is not None and not isinstance(params, dict):
        raise BadInputError(f"manifest case_params {_short(params)} is not an object")
    label: str | None = None
    if isinstance(case, Case):
        label, built = f"case {case.name!r}", case
    elif case is not None:
        label = case if isinstance(case, str) else (
            factory_spec(case) or str(getattr(case, "__qualname__", repr(case))))
        factory = load_factory(case, case_paths) if isinstance(case, str) else case
        if params is None and isinstance(manifest.get("params"), dict):
            params = manifest["params"]
        built = _build(factory, params, f"--case {label}")
    if case is not None:
        diffs = mismatch(manifest, tensor_rows, built) if tensor_rows is not None else []
        if diffs:
            what = f"the given {label} is not" if isinstance(case, Case) else (
                f"--case {label} does not rebuild")
            raise BadInputError(f"{what} the recorded case: " + "; ".join(diffs))
    else:
        name = manifest.get("case")
        if isinstance(name, str) and name in REFERENCES and manifest.get("builtin") is False:
            return Reference(None, None, f"case {name!r} was recorded from a case of your own, "
                                         "not the built-in case of that name; "
                                         + case_hint(manifest))
        if manifest.get("builtin") is False or not isinstance(name, str) or (
                name not in REFERENCES):
            return Reference(None, None, f"case {_short(name)} is not a built-in case; "
                                         + case_hint(manifest))
        recorded = manifest.get("kernel")
        if tensor_rows is not None and recorded not in BUILTIN_KERNELS[name]:
            return Reference(None, None, f"case {name!r} was recorded from kernel "
                                         f"{_short(recorded)}, not the built-in "
                                         f"{sorted(BUILTIN_KERNELS[name])}; " + case_hint(manifest))
        if params is None:
            return Reference(None, None, f"case {name!r} has no recorded case_params; "
                                         + case_hint(manifest))
        # numpy-only references (kernbench/references.py): replay never imports the kernels
        return Reference(f"registry:{name}", REFERENCES[name](**params), float32_inputs=True)
    if built.reference is None:
        return Reference(label, None, f"case {built.name!r} has no reference")
    return Reference(label, built.reference)


def reference_inputs(ref: Reference, inputs: dict[str, np.ndarray], dtypes: Mapping[str, str]
                     ) -> dict[str, np.ndarray]:
    """The reference's arguments made from the stored ``inputs`` (bfloat16 as uint16 bits),
    which are handed over (replaced one by one, so one copy at a time is alive): bfloat16 as
    float32 for a reference that computes in float32, else as ``ml_dtypes.bfloat16`` views."""
    for name in list(inputs):
        if dtypes.get(name) == "bfloat16" and inputs[name].dtype == BF16:
            if ref.float32_inputs:
                inputs[name] = to_f32(inputs[name])
            else:
                import ml_dtypes  # a user's reference takes bfloat16 as ml_dtypes has it

                inputs[name] = inputs[name].view(ml_dtypes.bfloat16)
    return inputs


def expected_outputs(ref: Reference, inputs: Mapping[str, np.ndarray], copy: bool = True
                     ) -> dict[str, np.ndarray]:
    """Call the reference on the inputs (copies of them unless ``copy`` is False: the caller
    hands them over); any failure is a ValueError with a message."""
    assert ref.fn is not None
    try:
        got = ref.fn(**({k: v.copy() for k, v in inputs.items()} if copy else inputs))
    except Exception as exc:  # noqa: BLE001 - user code
        raise ValueError(f"the reference raised {type(exc).__name__}: {exc}") from None
    if not isinstance(got, Mapping):
        raise ValueError(f"the reference returned {type(got).__name__}, not a dict")
    return {str(k): np.asarray(v) for k, v in got.items()}


#: elements compared at a time (float64 temporaries of a few MB, at any output size)
_CHUNK = 1 << 20


def compare(actual: np.ndarray, expected: np.ndarray, dtype: str) -> dict[str, Any]:
    """Errors of ``actual`` against ``expected`` under the dtype's tolerance."""
    tol = TOLERANCES.get(dtype, TOLERANCES["float32"])
    out: dict[str, Any] = {"rtol": tol.rtol, "atol": tol.atol, "atol_scale": 1.0}
    if expected.shape != actual.shape:
        out.update(ok=False, max_abs_err=None, max_rel_err=None, mismatches=int(actual.size),
                   message=f"reference shape {list(expected.shape)} != output shape "
                           f"{list(actual.shape)}")
        return out
    if np.array_equal(actual, expected, equal_nan=actual.dtype.kind == "f"):
        out.update(atol_scale=1.0, ok=True, max_abs_err=0.0, max_rel_err=0.0, mismatches=0)
        return out
    a_flat, e_flat = actual.reshape(-1), expected.reshape(-1)
    ints = actual.dtype.kind in "iu" and expected.dtype.kind in "iu"
    exact = ints and not (tol.atol or tol.rtol)
    with np.errstate(all="ignore"):
        scale = 1.0
        for lo in range(0, e_flat.size, _CHUNK):  # the output's scale first, then the errors
            e = e_flat[lo:lo + _CHUNK].astype(np.float64)
            finite = np.abs(e[np.isfinite(e)])
            scale = max(scale, float(finite.max()) if finite.size else 1.0)
        n_bad, max_abs, max_rel, first = 0, 0.0, 0.0, None
        for lo in range(0, a_flat.size, _CHUNK):  # bounded memory at any output size
            a = a_flat[lo:lo + _CHUNK].astype(np.float64)
            e = e_flat[lo:lo + _CHUNK].astype(np.float64)
            if exact:  # integers as they are: float64 rounds int64 above 2**53
                same = a_flat[lo:lo + _CHUNK] == e_flat[lo:lo + _CHUNK]
            else:
                same = (a == e) | (np.isnan(a) & np.isnan(e))
            err = np.where(same, 0.0, np.abs(a - e))
            err = np.where(np.isnan(err), np.inf, err)
            rel = np.where(same, 0.0, err / np.maximum(np.abs(e), np.finfo(np.float64).tiny))
            bad = ~same if exact else ~same & ~(err <= tol.atol * scale + tol.rtol * np.abs(e))
            n_bad += int(np.count_nonzero(bad))
            max_abs, max_rel = max(max_abs, float(err.max())), max(max_rel, float(rel.max()))
            if first is None and bad.any():
                i = int(np.argmax(bad))
                first = (lo + i, float(a[i]), float(e[i]))
    out.update(atol_scale=scale, ok=n_bad == 0, max_abs_err=max_abs, max_rel_err=max_rel,
               mismatches=n_bad)
    if first is not None:
        index = [int(x) for x in np.unravel_index(first[0], actual.shape)]
        out["first_mismatch"] = {"index": index, "actual": first[1], "expected": first[2]}
    return out


def check_outputs(actual: Mapping[str, np.ndarray], dtypes: Mapping[str, str],
                  expected: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], str | None]:
    """Per-output comparison; the error names reference outputs the trace does not have."""
    extra = sorted(set(expected) - set(actual))
    report: dict[str, Any] = {}
    for name, arr in actual.items():
        if dtypes[name] == "bfloat16" and arr.dtype == BF16:  # stored bits: their values
            arr = to_f32(arr)
        if name in expected:
            report[name] = {"checked": True, **compare(arr, expected[name], dtypes[name])}
        else:
            report[name] = {"checked": False, "ok": True}
    error = (f"the reference returns {extra}, which are not output tensors of the trace"
             if extra else None)
    return report, error
