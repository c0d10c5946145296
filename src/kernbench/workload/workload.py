"""``kb.Workload``: record every kernel of a model's layer in order on one hardware
configuration, verify each on its reduced slice, and compose the layer's and the model's
time from the recordings (docs/llama3-70b.md, ADR-0920).

Each kernel is its own launch, recorded into its own trace (a case is one launch): the
launches run back to back, each starting when the one before has ended (stream order: a
kernel reads what the one before wrote), so the layer's latency is the sum of its kernels'
latencies plus the inter-kernel costs, and those are the recorded cross-PE reductions (the
reduce-scatter launches) — the hardware model charges nothing else between launches. The
time per output token is the layers' time times the model's layers, plus its head (final
RMSNorm and LM head), all recorded. A launch that repeats one before it (the same case and
parameters: the layer's two RMSNorms and its two reductions, the final norm at decode) is
recorded once and its row repeated: recording is deterministic, so a second recording would
be the same bytes.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernbench.errors import BadInputError, RetimeError
from kernbench.kernels.registry import build_case, registry
from kernbench.record.recorder import record
from kernbench.trace import limits
from kernbench.trace.hw import HwConfig, load_hw
from kernbench.workload.layer import Step, head_steps, layer_steps
from kernbench.workload.model import Point, point
from kernbench.workload.result import Row, WorkloadResult, row_of

#: a launch whose HBM tensors hold up to this many bytes replays whole; a bigger one
#: replays on its reduced slice
REPLAY_WHOLE_BYTES = 64 << 20
#: a launch up to this many ops is checked whole as well as its slice (the race detector over
#: a prefill GEMM's million ops is the bench's, not every run's)
CHECK_OPS = 200_000


def tensor_bytes(trace: Any) -> int:
    """The bytes of a trace's HBM tensors (from tensors.parquet's shapes and dtypes)."""
    from kernbench.schemas.dtypes import by_name

    t = trace.tensors
    return sum(math.prod(shape) * by_name(dt).itemsize
               for shape, dt in zip(t["shape"].to_list(), t["dtype"].to_list(), strict=True))


def _case(spec: str, params: Mapping[str, Any]) -> Any:
    """The case of a step: a built-in name or a factory ``module:function``."""
    if ":" in spec:
        from kernbench.replay.verdict import load_factory

        return build_case(spec, params, factory=load_factory(spec), spec=spec)
    if spec not in registry():
        raise BadInputError(f"workload step case {spec!r} is not a built-in case")
    return build_case(spec, params)


class Workload:
    """A model's decoder layer (and its head) as kernels on one hardware configuration.

    ``kb.Workload("llama3-70b", phase="decode", hw="ahbm-v3", batch=8, context=32768)``;
    shape fields reduce the model (``hidden=256, heads=16, ...``). ``run(out)`` records
    every kernel into ``out`` (a temporary folder if None) and returns a
    ``WorkloadResult``; ``verify`` (default True) also records each kernel's reduced slice,
    replays it against numpy and checks it."""

    def __init__(self, model: str = "llama3-70b", phase: str = "decode",
                 hw: HwConfig | str | Path | None = None, **params: Any) -> None:
        self.hw = load_hw(hw)
        self.point: Point = point(model, phase, params, ranks=self.hw.n_pe)
        self.steps: list[Step] = layer_steps(self.point, self.hw)
        self.head: list[Step] = head_steps(self.point, self.hw)
        self.like: Path | None = None
        self.origin: str | None = None

    def run(self, out: str | Path | None = None, verify: bool = True,
            progress: Callable[[str], Any] | None = None, pool: Any = None,
            like: str | Path | None = None, origin: str | None = None) -> WorkloadResult:
        """Record every kernel into ``out``; ``progress`` is called with each kernel's name
        before it is recorded; ``pool``: a ``kb.ReplayPool`` to replay in (else one of its
        own, closed at the end). ``like``: the folder of a run of this workload on other
        hardware: a launch whose case and parameters are the same there is retimed from its
        trace (``kb.retime``, the same op log recording gives) instead of recorded, unless
        its op stream depends on the hardware. ``origin``: how a retimed launch's manifest
        names the run it came from (``origin/NN-name.ktrace``; default: ``like``'s absolute
        path), so that a sweep's points say the same wherever the source was read."""
        self.like = None if like is None else Path(like)
        self.origin = origin
        if out is None:
            with tempfile.TemporaryDirectory(prefix="kb-workload-") as tmp:
                return self._run(Path(tmp), verify, progress, pool)
        return self._run(Path(out), verify, progress, pool)

    def _obtain(self, spec: str, params: dict[str, Any], out: Path, rel: str
                ) -> tuple[Any, bool]:
        """The trace of a launch at ``out / rel``: retimed from ``like / rel`` when that is
        the same case with the same parameters, else recorded. (trace, retimed)"""
        case = _case(spec, params)
        path = out / rel
        source = None if self.like is None else self.like / rel
        if source is not None and (source / "manifest.json").is_file():
            from kernbench.record.retime import retime
            from kernbench.trace import Trace

            src = Trace.open(source)
            if (src.manifest.get("case"), src.manifest.get("case_params")) == (
                    case.name, dict(case.case_params or {})):
                try:
                    named = None if self.origin is None else f"{self.origin}/{rel}"
                    return retime(src, self.hw, path, origin=named), True
                except RetimeError:
                    pass  # the stream depends on the hardware: record it
        return record(case, path, hw=self.hw), False

    def check_budget(self) -> None:
        """Reading a trace takes twice its tensors' bytes of ``KERNBENCH_MAX_MEMORY_GB``:
        refuse, before anything is recorded, a launch whose trace could not be read (the KV
        cache of a big batch at a long context)."""
        p = self.point
        for step in [*self.steps, *self.head]:
            case = _case(step.case, step.params)
            limits.require(f"the {step.name} launch of {p.model} {p.phase} batch={p.batch} "
                           f"context={p.context} (its HBM tensors, twice)",
                           2 * sum(t.nbytes for t in case.tensors.values()))

    def _run(self, out: Path, verify: bool, progress: Callable[[str], Any] | None,
             given: Any) -> WorkloadResult:
        self.check_budget()
        out.mkdir(parents=True, exist_ok=True)
        pool = None
        if verify:
            from kernbench.replay.pool import ReplayPool

            pool = given or ReplayPool()
            pool.start(out)
        rows: list[Row] = []
        done: dict[str, Row] = {}  # the same launch twice (the two norms, the two reductions)
        try:
            for i, step in enumerate([*self.steps, *self.head]):
                if progress is not None:
                    progress(step.name)
                key = json.dumps([step.case, step.params], sort_keys=True)
                if key in done:  # recorded once: the same bytes a second recording gives
                    rows.append(replace(done[key], name=step.name, kernel=step.kernel,
                                        scope=step.scope, record_s=0.0, replay_s=0.0))
                    continue
                done[key] = self._step(out, i, step, pool)
                rows.append(done[key])
        finally:
            if pool is not None and given is None:
                pool.close()
        result = WorkloadResult(self.point, self.hw, rows)
        (out / "workload.json").write_text(json.dumps(result.to_json(), indent=1,
                                                      sort_keys=True) + "\n")
        # the wall seconds are not the answer: beside it, never in it
        (out / "timings.json").write_text(json.dumps(result.timings(), sort_keys=True) + "\n")
        return result

    def _step(self, out: Path, i: int, step: Step, pool: Any) -> Row:
        from kernbench.analyze import check, metrics
        from kernbench.analyze.critical import critical_path
        from kernbench.analyze.path_summary import summary

        name = f"{i:02d}-{step.name}.ktrace"
        t0 = time.perf_counter()
        trace, retimed = self._obtain(step.case, step.params, out, name)
        record_s = time.perf_counter() - t0
        verdict, check_ok, replay_s = None, None, 0.0
        if pool is not None:
            piece = trace
            if tensor_bytes(trace) > REPLAY_WHOLE_BYTES:
                piece = self._obtain(step.case, step.slice_case, out, f"slices/{name}")[0]
            else:
                step = replace(step, slice_note="the whole launch")
            t1 = time.perf_counter()
            res = pool.replay(piece.path, case=step.case if ":" in step.case else None)
            replay_s = time.perf_counter() - t1
            verdict = res.status
            check_ok = check(piece).ok and (piece is trace or trace.manifest["n_ops"] > CHECK_OPS
                                            or check(trace).ok)
        crit = summary(critical_path(trace), int(trace.manifest["t_end_ps"]))
        return replace(row_of(step, trace, metrics(trace), crit, verdict, check_ok, record_s,
                              replay_s), retimed=retimed)
