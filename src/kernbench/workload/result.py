"""A workload's answer: per kernel its recorded latency, share of the layer, binding engine or
shared part, efficiency and HBM bytes; per layer its latency; per model the time per output
token and tokens/s (decode) or the time to first token (prefill). ``to_json`` and ``table``
hold only what the recordings decide (no wall times, no paths), so they are the same bytes in
any process; the wall times are ``timings``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kernbench.trace.hw import HwConfig
from kernbench.workload.layer import Step
from kernbench.workload.model import Point

PS = 1e-12


@dataclass(frozen=True)
class Row:
    """One kernel of the workload, as recorded."""

    name: str
    kernel: str
    scope: str  # "layer" or "model"
    latency_ps: int
    hbm_bytes: int
    flops: int
    n_ops: int
    binding: str  # the engine or shared part the efficiency is against
    efficiency: float
    critical: str  # the engine holding most of the critical path
    critical_share: float  # its share of the latency
    split: str
    slice: str  # what the verified replay ran on
    verified: str | None  # the slice's replay status (None: not verified)
    check_ok: bool | None
    trace: str  # the trace's folder name
    record_s: float
    replay_s: float
    retimed: bool = False  # retimed from a run on other hardware (``Workload.run(like=)``)


def row_of(step: Step, trace: Any, m: Any, path: dict[str, Any], verdict: str | None,
           check_ok: bool | None, record_s: float, replay_s: float) -> Row:
    """A step's row from its trace's metrics and critical-path summary."""
    top = max(path["by_engine"], key=lambda r: (r["path_ps"], r["engine"]))
    return Row(step.name, step.kernel, step.scope, int(m["latency_ps"]),
               int(m["dma_read_bytes"]) + int(m["dma_write_bytes"]), int(m["flops"]),
               int(m["n_ops"]), str(m["efficiency_bound"]), round(float(m["efficiency"]), 4),
               str(top["engine"]), round(float(top["share"]), 4), step.split,
               step.slice_note, verdict, check_ok, trace.path.name, record_s, replay_s)


#: the row fields the JSON and the table carry (the deterministic ones)
FIELDS = ("name", "kernel", "scope", "latency_ps", "hbm_bytes", "flops", "n_ops", "binding",
          "efficiency", "critical", "critical_share", "split", "slice", "verified", "check_ok",
          "trace")


class WorkloadResult:
    def __init__(self, p: Point, hw: HwConfig, rows: list[Row]) -> None:
        self.point, self.hw, self.rows = p, hw, rows

    @property
    def layer_rows(self) -> list[Row]:
        return [r for r in self.rows if r.scope == "layer"]

    @property
    def layer_ps(self) -> int:
        """One decoder layer: its kernels back to back (the reduce-scatters among them)."""
        return sum(r.latency_ps for r in self.layer_rows)

    @property
    def head_ps(self) -> int:
        return sum(r.latency_ps for r in self.rows if r.scope == "model")

    @property
    def token_ps(self) -> int:
        """Every layer, then the head: a decode step (one token per request), or a prefill's
        forward (its time to first token)."""
        return self.point.shape.layers * self.layer_ps + self.head_ps

    @property
    def layer_s(self) -> float:
        return self.layer_ps * PS

    @property
    def token_s(self) -> float:
        return self.token_ps * PS

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second at the batch (decode); prompt tokens per second
        (prefill)."""
        return self.point.tokens / self.token_s

    def hbm_gbps(self) -> float:
        """The chip's HBM bandwidth: the stack's, or every PE's port where none is shared."""
        return self.hw.hbm_total_gbps or self.hw.n_pe * self.hw.hbm_gbps

    def kv_bytes(self) -> int:
        """The KV cache one layer's decode step reads (bf16 K and V of every request)."""
        s, p = self.point.shape, self.point
        return 2 * 2 * p.batch * p.context * s.kv_heads * s.head_dim

    def floor_s(self) -> float:
        """The physical floor of one decode layer: its weights and KV bytes at the chip's
        HBM bandwidth."""
        return (self.point.shape.weight_bytes() + self.kv_bytes()) / (self.hbm_gbps() * 1e9)

    def timings(self) -> dict[str, float]:
        """Wall seconds spent recording and replaying (not part of the answer)."""
        return {"record_s": sum(r.record_s for r in self.rows),
                "replay_s": sum(r.replay_s for r in self.rows),
                "retimed": sum(r.retimed for r in self.rows if r.record_s)}

    def to_json(self) -> dict[str, Any]:
        p = self.point
        rows = []
        for r in self.rows:
            d = {k: v for k, v in asdict(r).items() if k in FIELDS}
            d["latency_s"] = r.latency_ps * PS
            whole = self.layer_ps if r.scope == "layer" else self.token_ps
            d["share"] = round(r.latency_ps / whole, 4) if whole else 0.0
            rows.append(d)
        out: dict[str, Any] = {
            "model": p.model, "phase": p.phase, "batch": p.batch, "context": p.context,
            "attention": p.attention, "hw": self.hw.name, "n_pe": self.hw.n_pe,
            "layers": p.shape.layers, "shape": asdict(p.shape), "rows": rows,
            "layer_s": self.layer_s, "head_s": self.head_ps * PS, "token_s": self.token_s,
            "tokens_per_s": self.tokens_per_s,
            "weight_bytes_per_layer": p.shape.weight_bytes(),
            "kv_bytes_per_layer": self.kv_bytes() if p.phase == "decode" else 0,
            "verified": all(r.verified == "verified" for r in self.rows),
        }
        if p.phase == "decode":
            out["floor_layer_s"] = self.floor_s()
        else:
            out["ttft_s"] = self.token_s
        return out

    def table(self) -> str:
        """The answer as text: one line per kernel, then the layer and the model."""
        p = self.point
        head = (f"{p.model} {p.phase} batch={p.batch} context={p.context} on {self.hw.name} "
                f"({self.hw.n_pe} PEs, tensor parallel)")
        lines = [head, f"{'kernel':<14}{'latency us':>12}{'share':>8}  {'bound by':<11}"
                       f"{'eff':>6}  {'critical path':<17}{'HBM MB':>10}  slice"]
        for r in self.rows:
            whole = self.layer_ps if r.scope == "layer" else self.token_ps
            mark = {"verified": "verified", None: "-"}.get(r.verified, str(r.verified))
            lines.append(f"{r.name:<14}{r.latency_ps / 1e6:>12.2f}{r.latency_ps / whole:>8.1%}"
                         f"  {r.binding:<11}{r.efficiency:>6.3f}"
                         f"  {f'{r.critical} {r.critical_share:.0%}':<17}"
                         f"{r.hbm_bytes / 1e6:>10.2f}  {mark}")
        lines.append(f"layer {self.layer_s * 1e6:.2f} us; x{p.shape.layers} layers + head "
                     f"{self.head_ps * PS * 1e6:.2f} us")
        if p.phase == "decode":
            lines.append(f"time per output token {self.token_s * 1e3:.3f} ms; "
                         f"{self.tokens_per_s:.1f} tokens/s at batch {p.batch}; layer floor "
                         f"(weights + KV at {self.hbm_gbps():g} GB/s) "
                         f"{self.floor_s() * 1e6:.2f} us")
        else:
            lines.append(f"time to first token {self.token_s * 1e3:.3f} ms; "
                         f"{self.tokens_per_s:.0f} prompt tokens/s")
        return "\n".join(lines)
