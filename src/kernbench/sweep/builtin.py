"""Built-in sweep specs (the milestone's design space), and turning the ``kernbench sweep``
argument into a spec: a TOML file, a built-in spec name, or a case name with ``-p`` axes."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernbench.errors import BadInputError, closest
from kernbench.sweep.spec import SweepSpec, parse_spec, read_rules, with_overrides

#: the hardware study's axes (docs/hardware-study.md): ahbm-v3's shared parts, each kernel
#: recorded once and retimed for the other points
_STUDY_HW = """[hw]
preset = ["ahbm-v3"]
hbm_total_gbps = [204.8, 409.6, 819.2, 1638.4]
tcm_gbps = [64, 256, 1024]
topology = ["torus2d", "switch"]
n_pe = [8, 16]
[best]
metric = "latency_ps"
"""

#: the milestone-gqa-headline design space, one sweep per kernel family
BUILTIN: dict[str, str] = {
    "milestone-decode": """
# GQA decode (Llama3-70B shapes): which K/V tile and stream win at each context length.
# Lazy loads double-buffer K and V in scratch (4 x T_kv x D bf16): T_kv = 1024 would need
# the whole 1 MiB before Q and the running state, so only the composite stream (staged
# through the staging area) goes that far (ADR-0812)
case = "gqa-decode"
[grid]
S_kv = [4096, 32768]
[zip]
T_kv = [256, 512, 256, 512, 1024]
stream = ["lazy", "lazy", "composite", "composite", "composite"]
[best]
metric = "latency_ps"
per = ["S_kv"]
""",
    "milestone-prefill": """
# causal GQA prefill (one group on one PE): query and key tile sizes
case = "gqa-prefill"
[grid]
S = [2048]
H_q = [8]
H_kv = [1]
T_q = [8, 16]
T_kv = [32, 64, 128]
[best]
metric = "latency_ps"
""",
    "milestone-decode-tile": """
# GQA decode (Llama3-70B shapes, lazy loads): which K/V tile T_kv wins at each context S_kv
# (small tiles pay the per-op overheads on every tile and turn the sweep compute-bound; big
# tiles expose a longer last-tile chain: docs/attention-designs.md)
case = "gqa-decode"
[grid]
S_kv = [4096, 8192, 16384, 32768, 65536, 131072]
T_kv = [64, 128, 256, 512]
[best]
metric = "latency_ps"
per = ["S_kv"]
""",
    "milestone-ring": """
# ring attention prefill (one GQA group): how the ring scales with its number of ranks
case = "ring-attention"
[grid]
n_ranks = [2, 4, 8]
S_kv_per_rank = [1024]
phase = ["prefill"]
[best]
metric = "efficiency"
""",
    "milestone-ring-combine": """
# ring decode: the partial (m, l, O) combine, all-gather chain (n - 1 hops) vs tree (n // 2
# hops), over the number of ranks and the link latency (16 PEs, so every ring fits)
case = "ring-attention"
[grid]
phase = ["decode"]
S_kv_per_rank = [1024]
combine = ["chain", "tree"]
n_ranks = [2, 3, 4, 5, 8, 12, 16]
[hw]
n_pe = [16]
link_latency_ns = [250, 1000, 2000]
[stages]
replay = true
[best]
metric = "latency_ps"
per = ["n_ranks"]
""",
    "milestone-ring-causal": """
# causal ring prefill: token layout contiguous vs striped over the sequence, with the
# default link (1 us per hop) and a latency-free one; pe_busy_balance is the work balance
case = "ring-attention"
[grid]
causal = [true]
T_q = [16]
layout = ["contiguous", "striped"]
S_kv_per_rank = [128, 256, 512]
n_ranks = [4, 8]
[hw]
link_latency_ns = [0, 1000]
[best]
metric = "latency_ps"
per = ["S_kv_per_rank", "n_ranks"]
""",
    "milestone-concurrency-decode": """
# what concurrency buys (docs/hardware-model.md): GQA decode with blocking (ahbm-v1) or
# async engine issue, one or several resident programs per PE (one KV head per PE: k = 1)
case = "gqa-decode"
[grid]
S_kv = [4096, 32768]
[hw]
engine_issue = ["blocking", "async"]
max_programs_per_pe = [1, 4]
[best]
metric = "latency_ps"
per = ["S_kv"]
""",
    "milestone-concurrency-prefill": """
# what concurrency buys: the causal prefill (one group, one PE), serial or software-pipelined
# (Q·Kᵀ of the next tile under this tile's softmax), blocking or async engines
case = "gqa-prefill"
[grid]
S = [2048]
H_q = [8]
H_kv = [1]
schedule = ["serial", "pipelined"]
[hw]
engine_issue = ["blocking", "async"]
max_programs_per_pe = [1, 4]
[best]
metric = "latency_ps"
""",
    "milestone-concurrency-triton": """
# what concurrency buys a Triton kernel: the bench's matmul (512^3 fp16, 64 programs on 8
# PEs), blocking or async engines, one to 32 resident programs per PE
case = "kernbench.bench.triton_kernels:matmul_case"
[grid]
size = [512]
[hw]
engine_issue = ["blocking", "async"]
max_programs_per_pe = [1, 4, 32]
[best]
metric = "latency_ps"
""",
    # the hardware study (docs/hardware-study.md): ahbm-v3's shared parts over the panel's
    # kernels and a Triton kernel; each kernel records once, every other point is retimed
    "study-decode": """
# GQA decode at 32k (Llama3-70B shapes, 8 KV heads on 8 PEs) on ahbm-v3's shared parts
case = "gqa-decode"
[grid]
S_kv = [32768]
""" + _STUDY_HW,
    "study-prefill": """
# the 2k pipelined causal prefill (one GQA group, one PE) on ahbm-v3's shared parts
case = "gqa-prefill"
[grid]
S = [2048]
H_q = [8]
H_kv = [1]
schedule = ["pipelined"]
""" + _STUDY_HW,
    "study-ring": """
# ring attention prefill over 8 ranks (KV blocks rotate over IPCQ) on ahbm-v3's shared parts
case = "ring-attention"
[grid]
n_ranks = [8]
S_kv_per_rank = [1024]
""" + _STUDY_HW,
    "study-triton": """
# the Triton tutorial's matmul (512^3 fp16, 64 programs) on ahbm-v3's shared parts
case = "kernbench.bench.triton_kernels:matmul_case"
[grid]
size = [512]
""" + _STUDY_HW,
}


#: built-in suites: one name, several sweeps (each into OUT/<part>)
SUITES: dict[str, tuple[str, ...]] = {
    "milestone": ("milestone-decode", "milestone-decode-tile", "milestone-prefill",
                  "milestone-ring", "milestone-ring-combine", "milestone-ring-causal"),
    "milestone-concurrency": ("milestone-concurrency-decode", "milestone-concurrency-prefill",
                              "milestone-concurrency-triton"),
    "hardware-study": ("study-decode", "study-prefill", "study-ring", "study-triton"),
}


def plan(arg: str, out: str | Path, params: Sequence[str] = (), replay: bool | None = None,
         check: bool | None = None, rules: str | None = None) -> list[tuple[SweepSpec, Path]]:
    """The (spec, sweep directory) pairs ``kernbench sweep ARG -o OUT`` runs: one, or one per
    part of a suite (``OUT/decode``, ``OUT/prefill``, ...)."""
    if arg in SUITES and not Path(arg).is_file():
        return [(resolve_spec(name, params, replay, check, rules),
                 Path(out) / name.split("-", 1)[1]) for name in SUITES[arg]]
    return [(resolve_spec(arg, params, replay, check, rules), Path(out))]


def sweep_dirs(path: str | Path) -> list[Path]:
    """``path`` if it is a sweep, else the sweeps directly inside it (a suite's output)."""
    from kernbench.sweep.store import is_sweep

    path = Path(path)
    if is_sweep(path):
        return [path]
    return sorted(p for p in path.iterdir() if is_sweep(p)) if path.is_dir() else []


def suite_parts(path: str | Path) -> list[Path]:
    """The sweeps of a suite's output directory (``kernbench sweep milestone -o M``); empty
    when ``path`` is a sweep itself, a trace, or holds no sweep."""
    from kernbench.sweep.store import is_sweep

    path = Path(path)
    if is_sweep(path) or (path / "manifest.json").exists():
        return []
    return sweep_dirs(path)


def refuse_suite(path: str | Path, command: str) -> None:
    """BadInputError naming the suite's sweeps when ``path`` is a suite's directory: the
    command reads one trace or one sweep."""
    parts = suite_parts(path)
    if parts:
        raise BadInputError(
            f"{str(path)!r} is a suite of {len(parts)} sweeps "
            f"({', '.join(p.name for p in parts)}), not a trace or a sweep; name one sweep, "
            f"e.g. `kernbench {command} {parts[0]} ...` (`kernbench report {path}` "
            f"and `kernbench panel --best {path}` read the whole suite)")


def _document(arg: str) -> tuple[dict[str, Any], Path | None]:
    path = Path(arg)
    if arg.endswith(".toml") or path.is_file():
        from kernbench.sweep.spec import load_spec_file

        load_spec_file(path)  # one-line errors for a missing or malformed file
        return tomllib.loads(path.read_text()), path.parent
    if arg in BUILTIN:
        return tomllib.loads(BUILTIN[arg]), None
    if ":" not in arg:
        from kernbench.kernels.registry import registry
        from kernbench.workload.model import MODELS

        cases = registry()
        if arg not in cases and arg not in MODELS:
            raise BadInputError(
                f"unknown case {arg!r} (nor a workload, a spec file, a built-in spec or a "
                f"suite){closest(arg, [*BUILTIN, *SUITES, *cases, *MODELS])}; built-in specs: "
                f"{', '.join(BUILTIN)}; suites: {', '.join(SUITES)}; workloads: "
                f"{', '.join(MODELS)}; cases: {', '.join(sorted(cases))}")
    return {"case": arg}, None


def resolve_spec(arg: str, params: Sequence[str] = (), replay: bool | None = None,
                 check: bool | None = None, rules: str | None = None) -> SweepSpec:
    """The spec ``kernbench sweep ARG -p K=V1,V2 [--replay] [--check] [--rules F]`` runs."""
    data, base = _document(arg)
    data = with_overrides(data, params)
    spec = parse_spec(data, base)
    changes: dict[str, Any] = {}
    if replay is not None:
        changes["replay"] = replay
    if check is not None:
        changes["check"] = check
    if rules is not None:
        changes.update(check=True, rules_text=read_rules(rules))
    if changes:
        import dataclasses

        spec = dataclasses.replace(spec, **changes)
    return spec
