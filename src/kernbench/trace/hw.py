"""Hardware configuration: one frozen dataclass, named presets, TOML loading."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.errors import BadInputError, closest
from kernbench.trace.tomlfile import read_toml

#: the two engine-issue policies of one PE machine (docs/hardware-model.md)
ENGINE_ISSUE = ("blocking", "async")
#: how an engine picks among the issued ops of a PE's resident programs
ENGINE_ARBITRATION = ("in_order", "ready_first")
#: the link topologies a ``send`` is routed on (``trace/topology.py``)
TOPOLOGIES = ("ring", "bidir_ring", "mesh2d", "torus2d", "switch")
#: the most HBM channels a chip may have (a stack has 16 to 64; eight stacks, 512)
MAX_HBM_CHANNELS = 4096
_TEXT_FIELDS = frozenset({"name", "engine_issue", "engine_arbitration", "topology"})
#: the fields whose value picks from a list, and the list (the text fields but ``name``)
CHOICES = {"engine_issue": ENGINE_ISSUE, "engine_arbitration": ENGINE_ARBITRATION,
            "topology": TOPOLOGIES}


@dataclass(frozen=True)
class HwConfig:
    """The modelled AHBM accelerator. Stored whole in every trace's manifest."""

    name: str = "ahbm-v1"
    n_pe: int = 8
    clock_ghz: float = 1.0
    dispatch_cycles: int = 0
    # a guard (a decision on data, ADR-0840) costs this once its operand is visible
    branch_cycles: int = 0
    # DMA: per-PE HBM bandwidth in GB/s (bytes per ns), latency to visibility
    hbm_gbps: float = 128
    dma_latency_ns: int = 500
    # a transfer of k > 1 contiguous runs: sum(ceil(run / burst)) bursts + (k - 1) overheads
    dma_burst_bytes: int = 64
    dma_run_overhead_ns: float = 2
    # GEMM: cycles = ceil(M/R) * ceil(N/C) * K + overhead
    gemm_rows: int = 128
    gemm_cols: int = 128
    gemm_overhead_cycles: int = 32
    # MATH: cycles = ceil(elements / lanes) * op_cost + overhead
    math_lanes: int = 128
    math_op_cost: int = 1
    math_transcendental_cost: int = 2
    math_softmax_cost: int = 5
    math_overhead_cycles: int = 8
    # TCM
    kernel_scratch_kib: int = 1024
    stage_kib: int = 512
    tcm_align: int = 16
    # IPCQ ring links
    link_gbps: float = 64
    link_latency_ns: int = 1000
    ipcq_depth: int = 2
    ipcq_slot_kib: int = 4096  # largest message; the receiver holds depth slots per direction
    # Concurrency (docs/hardware-model.md): "blocking" engines (v1) or "async" issue through a
    # scoreboard
    engine_issue: str = "blocking"
    engine_queue_depth: int = 8  # issued-but-not-started ops one engine of one PE holds (async)
    max_programs_per_pe: int = 1  # resident programs per PE, capped further by scratch peak
    # The shared memory system (docs/hardware-model.md, "What the shared parts cost");
    # each default reproduces ahbm-v1/v2, where every shared part is private and
    # unlimited. HBM: the stack's bandwidth shared by every DMA channel of every PE (0:
    # unlimited), its channels and the address interleave across them
    hbm_total_gbps: float = 0
    hbm_channels: int = 16
    hbm_interleave_bytes: int = 256
    # TCM bandwidth per PE shared by every engine's reads and writes of it (0: unlimited)
    tcm_gbps: float = 0
    # the links a send is routed over (trace/topology.py); each link is link_gbps wide
    topology: str = "ring"
    # the PE's control processor issues one op every issue_ns at most (0: free)
    issue_ns: float = 0
    # in_order: one FIFO per engine shared by the resident programs; ready_first: one per
    # program, the op ready earliest starts (ties: the lower program)
    engine_arbitration: str = "in_order"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _TEXT_FIELDS:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise BadInputError(
                    f"hw field {f.name} must be a non-negative number, got {value!r}")
            if not math.isfinite(value):  # TOML writes inf and nan
                raise BadInputError(f"hw field {f.name} must be finite, got {value!r}")
        for positive in ("n_pe", "clock_ghz", "hbm_gbps", "gemm_rows", "gemm_cols", "math_lanes",
                         "dma_burst_bytes",
                         "link_gbps", "ipcq_depth", "tcm_align", "ipcq_slot_kib",
                         "engine_queue_depth", "max_programs_per_pe", "hbm_channels",
                         "hbm_interleave_bytes"):
            if getattr(self, positive) <= 0:
                raise BadInputError(
                    f"hw field {positive} must be positive, got {getattr(self, positive)!r}")

        for field, choices in CHOICES.items():
            value = getattr(self, field)
            if not isinstance(value, str) or value not in choices:
                hint = closest(value, choices) if isinstance(value, str) else ""
                raise BadInputError(f"hw field {field} must be one of {choices}, got "
                                    f"{value!r}{hint}")
        for f in dataclasses.fields(self):  # a count, a size or a cycle count
            if f.type == "int" and not isinstance(getattr(self, f.name), int):
                raise BadInputError(
                    f"hw field {f.name} must be a whole number, got {getattr(self, f.name)!r}")
        if self.hbm_channels > MAX_HBM_CHANNELS:  # one Server each: a bound, not a hang
            raise BadInputError(f"hw field hbm_channels must be at most {MAX_HBM_CHANNELS}, "
                                f"got {self.hbm_channels!r}")
        if not isinstance(self.name, str):
            raise BadInputError(f"hw field name must be a string, got {self.name!r}")

    @property
    def cycle_ps(self) -> int:
        return round(1000 / self.clock_ghz)

    @property
    def kernel_scratch_bytes(self) -> int:
        return self.kernel_scratch_kib * 1024

    @property
    def stage_bytes(self) -> int:
        return self.stage_kib * 1024

    @property
    def ipcq_slot_bytes(self) -> int:
        return self.ipcq_slot_kib * 1024

    @property
    def shared(self) -> bool:
        """Whether a shared part of the chip is modelled: then the chip-wide
        machine times the recording (``record/machine/chip``); else each PE runs alone in
        closed form, exactly as ahbm-v1 and ahbm-v2 always have."""
        return (self.hbm_total_gbps > 0 or self.tcm_gbps > 0 or self.topology != "ring"
                or self.issue_ns > 0 or self.engine_arbitration != "in_order")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "hw config") -> HwConfig:
        data = dict(data)
        base_name = data.pop("base", "ahbm-v1")
        if base_name not in PRESETS:
            raise BadInputError(f"{where}: unknown base preset {base_name!r}"
                                f"{closest(base_name, PRESETS)}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise BadInputError(f"{where}: unknown hw fields {unknown}"
                                f"{closest(unknown[0], known)}")
        base = PRESETS[base_name].to_dict()
        base.update(data)
        return cls(**base)


PRESETS: dict[str, HwConfig] = {
    "ahbm-v1": HwConfig(),
    "ahbm-v2": HwConfig(name="ahbm-v2", engine_issue="async", engine_queue_depth=8,
                        max_programs_per_pe=32),
    # ahbm-v2 with its shared parts priced (each value's source: docs/hardware-model.md,
    # "What the shared parts cost")
    "ahbm-v3": HwConfig(name="ahbm-v3", engine_issue="async", engine_queue_depth=8,
                        max_programs_per_pe=32, hbm_total_gbps=819.2, hbm_channels=16,
                        hbm_interleave_bytes=256, tcm_gbps=2048, topology="torus2d",
                        link_latency_ns=20, issue_ns=20, engine_arbitration="ready_first"),
}


#: the preset of a recording that names none (record, sweep, panel, kbt.case, the plugin)
DEFAULT_PRESET = "ahbm-v2"
#: the environment variable that overrides ``DEFAULT_PRESET`` (a preset name or a TOML file)
HW_ENV = "KERNBENCH_HW"


def default_hw() -> str:
    """The hardware a recording uses when none is named: ``$KERNBENCH_HW``, else ahbm-v2."""
    return os.environ.get(HW_ENV) or DEFAULT_PRESET


def load_hw(spec: HwConfig | str | Path | None) -> HwConfig:
    """A HwConfig from an instance, a preset name, or a TOML file path (None: ``default_hw``)."""
    if spec is None:
        spec = default_hw()
    if isinstance(spec, HwConfig):
        return spec
    if str(spec) in PRESETS:
        return PRESETS[str(spec)]
    path = Path(spec)
    if not path.is_file():
        raise BadInputError(
            f"unknown hw {str(spec)!r}: not a preset ({', '.join(PRESETS)}) nor a TOML file"
            f"{closest(str(spec), PRESETS)}")
    data = read_toml(path, "hw file")
    data = data.get("hw", data)
    data.setdefault("name", path.stem)
    return HwConfig.from_dict(data, where=str(path))
