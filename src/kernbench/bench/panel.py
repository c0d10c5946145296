"""The milestone-gqa-headline panel: the headline GQA configurations, recorded, measured, and
(a reduced subset) replayed with data. One table row per configuration."""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze import metrics
from kernbench.errors import BadInputError
from kernbench.kernels.registry import build_case
from kernbench.record.runner import record
from kernbench.trace import writing
from kernbench.trace.hw import HwConfig, load_hw

LLAMA = {"H_q": 64, "H_kv": 8, "D": 128}


@dataclass(frozen=True)
class Config:
    """One row of the panel: a case at its params, and whether Phase 2 runs on it."""

    label: str
    case: str
    params: dict[str, Any] = field(default_factory=dict)
    replay: bool = False
    link_hiding: bool = False  # ring prefill: report how much link time compute hides


def _decode(s_kv: int, replay: bool = False, **kw: Any) -> Config:
    label = f"decode {s_kv // 1024}k" + (" composite" if kw else " (8 KV heads / 8 PEs)")
    return Config(label, "gqa-decode", {"S_kv": s_kv, **kw}, replay=replay)


def _prefill(s: int) -> Config:
    return Config(f"prefill {s // 1024}k causal (1 group / 1 PE)", "gqa-prefill",
                  {"S": s, "H_q": 8, "H_kv": 1})


def _ring(ranks: int, s_kv: int, phase: str, replay: bool = False) -> Config:
    return Config(f"ring {phase} {ranks} x {s_kv}", "ring-attention",
                  {"n_ranks": ranks, "S_kv_per_rank": s_kv, "phase": phase}, replay=replay,
                  link_hiding=phase == "prefill" and not replay)


#: replayed with data in both panels (reduced GQA prefill h_q=8 h_kv=1, reduced ring)
_REDUCED = [
    Config("prefill reduced h_q=8 h_kv=1", "gqa-prefill",
           {"S": 256, "T_kv": 64, "H_q": 8, "H_kv": 1}, replay=True),
    _ring(4, 256, "prefill", replay=True),
]
_COMPOSITE = _decode(32768, stream="composite", T_kv=4096)
#: the flagship: Llama3-70B prefill at 8k, all 8 KV heads and 64 query heads, replayed whole
FLAGSHIP = Config("prefill 8k causal Llama3-70B (8 KV heads / 8 PEs), replayed", "gqa-prefill",
                  {"S": 8192}, replay=True)

QUICK = [_decode(4096, replay=True), _decode(32768), _COMPOSITE, _prefill(2048),
         _ring(8, 1024, "prefill"), _ring(8, 4096, "decode"), *_REDUCED]
FULL = [_decode(4096, replay=True), _decode(32768, replay=True), _decode(131072), _COMPOSITE,
        _prefill(8192), FLAGSHIP, _ring(8, 4096, "prefill"),
        _ring(8, 4096, "decode", replay=True), *_REDUCED]

#: a link so fast it costs nothing: the counterfactual that shows how much link time shows
FREE_LINK = HwConfig(name="free-link", link_gbps=1e9, link_latency_ns=0)


def free_link(hw: HwConfig) -> HwConfig:
    """``hw`` with ``FREE_LINK``'s link (the counterfactual of the panel's own hardware)."""
    return dataclasses.replace(hw, name="free-link", link_gbps=FREE_LINK.link_gbps,
                               link_latency_ns=FREE_LINK.link_latency_ns)


def link_hidden(trace_latency: int, free_latency: int, link_ps: float) -> float:
    """Fraction of the per-rank link time (busy + latency of its sends) that did not add to
    the latency, against the same recording with a free link."""
    if link_ps <= 0:
        return 1.0
    exposed = max(0, trace_latency - free_latency)
    return max(0.0, 1.0 - exposed / link_ps)


def run_config(cfg: Config, workdir: Path) -> dict[str, Any]:
    from kernbench.replay import replay

    case = build_case(cfg.case, cfg.params)
    out = workdir / f"{len(list(workdir.iterdir()))}.ktrace"
    t0 = time.perf_counter()
    trace = record(case, out)
    record_s = time.perf_counter() - t0
    m = metrics(trace)
    row: dict[str, Any] = {
        "config": cfg.label, "case": cfg.case,
        "params": " ".join(f"{k}={v}" for k, v in cfg.params.items()),
        "latency_us": trace.t_end_ps / 1e6,
        "roofline_bound": m["roofline_bound"], "roofline_us": m["roofline_ps"] / 1e6,
        "efficiency": round(m["efficiency"], 4),
        "dma_read_count": m["dma_read_count"],
        "dma_bytes": m["dma_read_bytes"] + m["dma_write_bytes"],
        "scratch_peak_bytes": m["scratch_peak_bytes"],
        "n_ops": trace.n_ops, "record_s": round(record_s, 3),
        "replay": "-", "replay_s": None, "max_abs_err": None, "link_hidden": None,
    }
    if cfg.link_hiding:
        free = record(case, workdir / f"{out.stem}-free.ktrace", hw=free_link(load_hw(None)))
        ops = trace.ops
        sends = ops.filter(pl.col("name").cast(pl.String) == "send")
        per_rank = (sends["t_end_ps"] - sends["t_start_ps"]).sum() / max(1, ops["pe"].n_unique())
        row["link_hidden"] = round(link_hidden(trace.t_end_ps, free.t_end_ps, per_rank), 4)  # type: ignore[arg-type]
    if cfg.replay:
        t0 = time.perf_counter()
        res = replay(trace.path)
        row["replay_s"] = round(time.perf_counter() - t0, 3)
        row["replay"] = "ok" if res.ok else "WRONG"
        row["max_abs_err"] = max(res.max_abs_err.values(), default=None)
    return row


def run_panel(full: bool = False, out: str | Path | None = None,
              progress: Callable[[str], Any] | None = None) -> pl.DataFrame:
    """Record (and replay) every configuration; write Parquet, CSV and a PNG chart to ``out``
    if given."""
    configs = FULL if full else QUICK
    if out is not None:
        out = Path(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInputError(f"cannot write the panel to {str(out)!r}: {exc.strerror}") from None
    rows = []
    with tempfile.TemporaryDirectory(prefix="kb-panel-") as tmp:
        for i, cfg in enumerate(configs, 1):
            if progress:
                progress(f"[{i}/{len(configs)}] {cfg.label}")
            rows.append(run_config(cfg, Path(tmp)))
    frame = pl.DataFrame(rows)
    if out is not None:
        writing.write_frame(frame, "panel", out / "panel.parquet")
        frame.write_csv(out / "panel.csv")
        from kernbench.plot.panel_figure import save_panel_chart  # matplotlib only when asked

        save_panel_chart(frame, out / "panel.png")
    return frame


def format_panel(frame: pl.DataFrame) -> str:
    """An aligned table of the columns a reader looks at first."""
    cols = ["config", "latency_us", "roofline_bound", "efficiency", "dma_read_count",
            "dma_bytes", "scratch_peak_bytes", "record_s", "replay", "link_hidden"]
    text = [[str(c) for c in cols]]
    for row in frame.select(cols).iter_rows():
        text.append(["-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
                     for v in row])
    widths = [max(len(r[i]) for r in text) for i in range(len(cols))]
    lines = []
    for j, r in enumerate(text):
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(r, widths, strict=True))))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_best(sweeps: str | Path) -> str:
    """The best point of each sweep under ``sweeps`` (one sweep, or a suite's folder such as
    ``kernbench sweep milestone -o DIR``'s), ranked by each spec's ``[best]``."""
    from kernbench.analyze.report import format_table
    from kernbench.sweep.builtin import sweep_dirs
    from kernbench.sweep.report import best_points, load_sweep

    dirs = sweep_dirs(sweeps)
    if not dirs:
        raise BadInputError(f"{str(sweeps)!r} is not a sweep nor a folder of sweeps")
    rows = []
    for d in dirs:
        spec, _ = load_sweep(d)
        for r in best_points(d).iter_rows(named=True):
            rows.append([d.name, spec.case, " ".join(f"{k}={r[k]}" for k in spec.swept),
                         spec.best_metric, r["latency_ps"] / 1e6, r["efficiency"],
                         r["roofline_bound"], r["point_id"]])
    return format_table(["sweep", "case", "best point", "by", "latency_us", "efficiency",
                         "bound", "point_id"], rows)
