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
from kernbench.record.recorder import record
from kernbench.trace import writing
from kernbench.trace.hw import HwConfig, default_hw, load_hw
from kernbench.trace.scalars import as_float

LLAMA = {"H_q": 64, "H_kv": 8, "D": 128}


@dataclass(frozen=True)
class Config:
    """One row of the panel: a case at its params, and whether Phase 2 runs on it."""

    label: str
    case: str
    params: dict[str, Any] = field(default_factory=dict)
    replay: bool = False
    link_hiding: bool = False  # ring prefill: report how much link time compute hides
    headline: bool = False  # also recorded on BASELINE when the panel runs on another preset
    #: recorded on the panel's hardware with this link topology (None: its own)
    topology: str | None = None


#: the preset a headline row is compared with when ``kernbench panel --hw`` names another
BASELINE = "ahbm-v1"


def _decode(s_kv: int, replay: bool = False, **kw: Any) -> Config:
    label = f"decode {s_kv // 1024}k" + (" composite" if kw else " (8 KV heads / 8 PEs)")
    return Config(label, "gqa-decode", {"S_kv": s_kv, **kw}, replay=replay,
                  headline=not kw and s_kv <= 32768)


def _schedule(schedule: str) -> tuple[str, dict[str, Any]]:
    return ("", {}) if schedule == "serial" else (f" {schedule}", {"schedule": schedule})


def _prefill(s: int, schedule: str = "serial") -> Config:
    label, extra = _schedule(schedule)
    return Config(f"prefill {s // 1024}k causal{label} (1 group / 1 PE)", "gqa-prefill",
                  {"S": s, "H_q": 8, "H_kv": 1, **extra}, headline=True)


def _ring(ranks: int, s_kv: int, phase: str, replay: bool = False,
          schedule: str = "serial") -> Config:
    label, extra = _schedule(schedule)
    return Config(f"ring {phase}{label} {ranks} x {s_kv}", "ring-attention",
                  {"n_ranks": ranks, "S_kv_per_rank": s_kv, "phase": phase, **extra},
                  replay=replay, link_hiding=phase == "prefill" and not replay,
                  headline=not replay)


def _routed(ranks: int, s_kv: int, combine: str, topology: str | None = None,
            replay: bool = False) -> Config:
    """Ring decode combining by PE index (docs/adr/0751), on a topology that routes."""
    on = f" on {topology}" if topology else ""
    return Config(f"ring decode {combine}{on} {ranks} x {s_kv}", "ring-attention",
                  {"n_ranks": ranks, "S_kv_per_rank": s_kv, "phase": "decode",
                   "combine": combine}, replay=replay, topology=topology)


#: the rows of a panel on hardware with a shared part (ahbm-v3: routed links): ring decode's
#: binomial combine, the fastest on ahbm-v3's on-chip hops (docs/adr/0752), on the preset's
#: own topology and on a switch: the two ring decode rows of docs/hardware-model.md's
#: "Measured: ahbm-v2 against ahbm-v3"
ROUTED = [_routed(8, 4096, "binomial", replay=True), _routed(8, 4096, "binomial", "switch")]


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
FLAGSHIP_PIPELINED = Config("prefill 8k causal pipelined Llama3-70B (8 KV heads / 8 PEs)",
                            "gqa-prefill", {"S": 8192, "schedule": "pipelined"}, headline=True)

QUICK = [_decode(4096, replay=True), _decode(32768), _COMPOSITE, _prefill(2048),
         _prefill(2048, "pipelined"), _ring(8, 1024, "prefill"),
         _ring(8, 1024, "prefill", schedule="pipelined"), _ring(8, 4096, "decode"), *_REDUCED]
FULL = [_decode(4096, replay=True), _decode(32768, replay=True), _decode(131072), _COMPOSITE,
        _prefill(8192), _prefill(8192, "pipelined"), FLAGSHIP, FLAGSHIP_PIPELINED,
        _ring(8, 4096, "prefill"), _ring(8, 4096, "prefill", schedule="pipelined"),
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


def run_config(cfg: Config, workdir: Path, hw: str = BASELINE,
               replayed: bool = True) -> dict[str, Any]:
    """One panel row: ``cfg`` recorded on ``hw`` (and replayed if it asks and ``replayed``)."""
    from kernbench.replay import replay

    case = build_case(cfg.case, cfg.params)
    out = workdir / f"{len(list(workdir.iterdir()))}.ktrace"
    on: str | HwConfig = hw if cfg.topology is None else dataclasses.replace(
        load_hw(hw), topology=cfg.topology)
    t0 = time.perf_counter()
    trace = record(case, out, hw=on)
    record_s = time.perf_counter() - t0
    m = metrics(trace)
    row: dict[str, Any] = {
        "config": cfg.label, "hw": hw, "case": cfg.case,
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
        free = record(case, workdir / f"{out.stem}-free.ktrace", hw=free_link(load_hw(hw)))
        ops = trace.ops
        sends = ops.filter(pl.col("name").cast(pl.String) == "send")
        link_ps = as_float((sends["t_end_ps"] - sends["t_start_ps"]).sum())
        per_rank = link_ps / max(1, ops["pe"].n_unique())
        row["link_hidden"] = round(link_hidden(trace.t_end_ps, free.t_end_ps, per_rank), 4)
    if cfg.replay and replayed:
        t0 = time.perf_counter()
        res = replay(trace.path)
        row["replay_s"] = round(time.perf_counter() - t0, 3)
        row["replay"] = "ok" if res.verified else res.status.upper()
        row["max_abs_err"] = max(res.max_abs_err.values(), default=None)
    return row


def run_panel(full: bool = False, out: str | Path | None = None,
              progress: Callable[[str], Any] | None = None,
              hw: str | None = None) -> pl.DataFrame:
    """Record (and replay) every configuration on ``hw`` (default: the recording default,
    ``$KERNBENCH_HW`` or ``DEFAULT_PRESET``, as ``record`` and ``sweep``; ADR-0802), and the
    headline ones also on ``BASELINE`` when ``hw`` is another preset (side by side:
    ``compare_presets``); on hardware with a shared part (ahbm-v3) also the ``ROUTED`` rows;
    write Parquet, CSV and a PNG chart to ``out`` if given."""
    hw = hw or default_hw()
    shared = load_hw(hw).shared  # an unknown preset or a bad file: one line, nothing recorded
    jobs = [(cfg, hw) for cfg in (FULL if full else QUICK)]
    if hw != BASELINE:
        jobs += [(cfg, BASELINE) for cfg, _ in jobs if cfg.headline]
    if shared:  # links that route: the combines by PE index
        jobs += [(cfg, hw) for cfg in ROUTED]
    if out is not None:
        out = Path(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInputError(f"cannot write the panel to {str(out)!r}: {exc.strerror}") from None
    rows = []
    with tempfile.TemporaryDirectory(prefix="kb-panel-") as tmp:
        for i, (cfg, on) in enumerate(jobs, 1):
            if progress:
                progress(f"[{i}/{len(jobs)}] {cfg.label} on {on}")
            rows.append(run_config(cfg, Path(tmp), on, replayed=on == hw))
    frame = pl.DataFrame(rows)
    if out is not None:
        writing.write_frame(frame, "panel", out / "panel.parquet")
        frame.write_csv(out / "panel.csv")
        from kernbench.plot.panel_figure import save_panel_chart  # matplotlib only when asked

        save_panel_chart(frame, out / "panel.png")
    return frame


def compare_presets(frame: pl.DataFrame) -> pl.DataFrame:
    """The headline rows side by side: one row per configuration recorded on ``BASELINE``
    and on the panel's preset, with both latencies and efficiencies and the speed-up."""
    if "hw" not in frame.columns or frame["hw"].n_unique() < 2:
        return pl.DataFrame()
    main = frame["hw"][0]
    pick = ["config", "latency_us", "efficiency"]
    base = frame.filter(pl.col("hw") == BASELINE).select(pick)
    other = frame.filter(pl.col("hw") == main).select(pick)
    both = base.join(other, on="config", suffix="_new", maintain_order="left")
    return both.select(
        "config", pl.col("efficiency").alias(f"efficiency {BASELINE}"),
        pl.col("efficiency_new").alias(f"efficiency {main}"),
        pl.col("latency_us").alias(f"latency_us {BASELINE}"),
        pl.col("latency_us_new").alias(f"latency_us {main}"),
        (pl.col("latency_us") / pl.col("latency_us_new")).round(3).alias("speedup"))


def _aligned(frame: pl.DataFrame, cols: list[str]) -> str:
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


def format_panel(frame: pl.DataFrame) -> str:
    """An aligned table of the columns a reader looks at first (the panel's preset), then
    the headline rows side by side with ``BASELINE`` when the panel ran on another one."""
    cols = ["config", "latency_us", "roofline_bound", "efficiency", "dma_read_count",
            "dma_bytes", "scratch_peak_bytes", "record_s", "replay", "link_hidden"]
    main = frame.filter(pl.col("hw") == frame["hw"][0]) if "hw" in frame.columns else frame
    text = _aligned(main, cols)
    side = compare_presets(frame)
    if side.height:
        text += f"\n\n{BASELINE} -> {frame['hw'][0]}\n" + _aligned(side, side.columns)
    return text


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
