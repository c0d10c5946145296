"""Issue 43: the memory budget holds in every command, the analyses included. The tile bomb
is one indexed ``dma_read`` of a [SIDE, SIDE] float32 tile with strides [0, 0] (every element
is ``x[0]``, in bounds), SIDE the largest square the validator's tile budget lets through
under ``KERNBENCH_MAX_MEMORY_GB=1``. Every command runs on it in one child process whose
address space is limited to twice the budget (``RLIMIT_AS`` set in ``preexec_fn``; one
process start for all, the commands one after another): each answers with its result or the
budget's one-line refusal, exit 0/1/2, never a signal, an allocator abort or a traceback.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import kernbench as kb
from kernbench.analyze.access import access_map, element_accesses
from kernbench.trace import element_checks as ec
from kernbench.trace.limits import GIB, TraceLimitError

from .corrupt_v2 import base_case, make, tile_bomb

BUDGET_GB = 1
AS_CAP = 2 * BUDGET_GB * GIB
#: the largest square tile the validator binds under the budget (``TileBudget``)
SIDE = math.isqrt(BUDGET_GB * GIB // (ec.KEPT_BYTES_PER_ELEMENT + ec.BUILD_BYTES_PER_ELEMENT))
#: x's elements the base trace's other placed loads read (6 masked-in, 8 permuted), all
#: distinct and none of them x[0]
OTHER_READS = 14
CASE = "tests.fuzz.corrupt_v2:base_case"
RSS_SLACK = 300 << 20

#: each command's arguments ({t}: the bomb, {b}: the base trace, {o}: an output folder)
COMMANDS: dict[str, list[str]] = {
    "replay": ["replay", "{t}"],
    "replay --case": ["replay", "{t}", "--case", CASE],
    "check": ["check", "{t}"],
    "report": ["report", "{t}"],
    "report --json": ["report", "{t}", "--json"],
    "export": ["export", "{t}", "-o", "{o}/timeline.json"],
    "sql": ["sql", "{t}", "SELECT name, count(*) AS n, sum(num_elements) AS e FROM ops "
                          "GROUP BY name ORDER BY name"],
    "diff": ["diff", "{b}", "{t}"],
    "plot": ["plot", "{t}", "-o", "{o}/trace.png"],
    "plot --access": ["plot", "{t}", "--access", "x", "-o", "{o}/access.png"],
}

#: runs every command of argv[1] (JSON) in turn; prints each one's [exit code or the
#: traceback it raised, stdout, stderr], then the process's peak RSS (VmHWM, bytes)
CHILD = """
import contextlib, io, json, sys, traceback
from kernbench.cli import main
results = []
for args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:
            code = "raised: " + traceback.format_exc()
    results.append([code, out.getvalue(), err.getvalue()])
with open("/proc/self/status") as f:
    hwm = int(next(ln for ln in f if ln.startswith("VmHWM:")).split()[1]) * 1024
print(json.dumps({"results": results, "hwm": hwm}))
"""


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tile_bomb")
    base = kb.record(base_case(), out=root / "base.ktrace").path
    return {"base": base, "bomb": make(tile_bomb([SIDE, SIDE]), base, root / "bomb.ktrace"),
            "out": root}


@pytest.fixture(scope="module")
def answers(traces: dict[str, Path]) -> dict[str, tuple[int, str, str]]:
    """Every command's (exit code, stdout, stderr) on the bomb, from one capped child; the
    child must itself end normally (no signal: nothing killed or aborted it)."""
    argv = [[a.format(t=traces["bomb"], b=traces["base"], o=traces["out"]) for a in args]
            for args in COMMANDS.values()]
    env = {**os.environ, "KERNBENCH_MAX_MEMORY_GB": str(BUDGET_GB), "POLARS_MAX_THREADS": "2",
           "ARROW_DEFAULT_MEMORY_POOL": "system"}
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv)], capture_output=True,
                       text=True, env=env, preexec_fn=_limit_address_space, timeout=300)
    assert p.returncode == 0, f"the child ended with {p.returncode}: {p.stderr[-2000:]}"
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["hwm"] < BUDGET_GB * GIB + RSS_SLACK, f"peak RSS {got['hwm'] / GIB:.2f} GiB"
    return {name: tuple(r) for name, r in zip(COMMANDS, got["results"], strict=True)}


def _answered(answers: dict[str, tuple[int, str, str]], name: str) -> tuple[int, str, str]:
    """The command's answer, after the checks every command passes: an exit code of 0, 1 or
    2, no traceback or allocator message, and a refusal (2) is one line naming the budget."""
    code, out, err = answers[name]
    assert code in (0, 1, 2), f"{name}: {code}"
    for bad in ("Traceback", "memory allocation", "panicked", "out of memory"):
        assert bad not in out + err, f"{name}: {err[-800:]}"
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and "over the 1 GiB limit" in lines[0], (name, err)
    return code, out, err


def test_the_bomb_is_just_under_the_validators_tile_budget(traces: dict[str, Path],
                                                            monkeypatch) -> None:
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", str(BUDGET_GB))
    kb.Trace.open(traces["bomb"]).validated()  # accepted
    over = make(tile_bomb([SIDE + 1, SIDE + 1]), traces["base"], traces["out"] / "over.ktrace")
    with pytest.raises(TraceLimitError, match=r"indexed tiles .* over the 1 GiB limit"):
        kb.Trace.open(over).validated()


@pytest.mark.parametrize("name", ["replay", "replay --case"])
def test_replay_answers_the_tile_bomb_with_its_failed_op(answers, name: str) -> None:
    """The tile's TCM output lies outside the scratch area: replay's verdict names op 0."""
    code, out, _ = _answered(answers, name)
    assert code == 1 and "FAILED" in out and "op 0 (dma_read" in out, out


def test_check_answers_the_tile_bomb_with_its_violations(answers) -> None:
    code, out, _ = _answered(answers, "check")
    assert code == 1
    status = {ln.split()[0]: ln.split()[1] for ln in out.split("\n\n")[1].splitlines()[2:]}
    assert status["scratch_budget"] == status["nbytes_shapes"] == "FAIL"
    assert status["data_race"] == status["hbm_bounds"] == "ok"


def test_report_answers_the_tile_bomb_with_x_read_side_squared_times(answers) -> None:
    code, out, _ = _answered(answers, "report")
    assert code == 0
    row = next(ln.split() for ln in out.split("HBM tensors")[1].splitlines()
               if ln.startswith("x "))
    assert row[1:3] == [str(4 * (SIDE * SIDE + OTHER_READS)), str(4 * (1 + OTHER_READS))]


def test_report_json_answers_the_tile_bomb_with_distinct_and_repeated_reads(answers) -> None:
    code, out, _ = _answered(answers, "report --json")
    assert code == 0
    x = next(t for t in json.loads(out)["tensors"] if t["tensor"] == "x")
    assert x["bytes_read"] == 4 * (SIDE * SIDE + OTHER_READS)
    assert x["bytes_used"] == 4 * (1 + OTHER_READS)
    assert x["rereads"] == pytest.approx((SIDE * SIDE + OTHER_READS) / (1 + OTHER_READS))


def test_export_answers_the_tile_bomb(answers, traces) -> None:
    code, _, _ = _answered(answers, "export")
    assert code == 0
    events = json.loads((traces["out"] / "timeline.json").read_text())["traceEvents"]
    assert any(e.get("name") == "dma_read" for e in events)


def test_sql_answers_the_tile_bomb(answers) -> None:
    code, out, _ = _answered(answers, "sql")
    assert code == 0
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[2:-1]}
    assert rows["dma_read"][0] == "3" and rows["gather"][0] == "1", out


def test_diff_answers_the_tile_bomb_with_the_changed_tile(answers) -> None:
    code, out, _ = _answered(answers, "diff")
    assert code == 0
    assert f"b: op 0 dma_read [[{SIDE}, {SIDE}]] -> [{SIDE}, {SIDE}]" in out, out


@pytest.mark.parametrize(("name", "png"), [("plot", "trace.png"), ("plot --access",
                                                                    "access.png")])
def test_plot_answers_the_tile_bomb_with_a_picture(answers, traces, name: str,
                                                    png: str) -> None:
    code, _, _ = _answered(answers, name)
    assert code == 0
    assert (traces["out"] / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_bombs_access_map_counts_x0_read_side_squared_times_without_the_long_frame(
        traces: dict[str, Path], monkeypatch) -> None:
    """In process: the per-element map and traffic come from the footprint (x[0] moved
    SIDE^2 times); the long per-(op, element) frame is refused before it is built."""
    monkeypatch.setenv("KERNBENCH_MAX_MEMORY_GB", str(BUDGET_GB))
    trace = kb.Trace.open(traces["bomb"]).validated()
    x0 = access_map(trace, "x").row(0, named=True)
    assert (x0["reads"], x0["touches"], x0["writes"], x0["programs"], x0["owner"]) == (
        SIDE * SIDE, SIDE * SIDE, 0, 1, 0)
    with pytest.raises(TraceLimitError, match=r"per-element accesses \([\d,]+ rows\) needs "
                                              r"[\d.]+ GiB, over the 1 GiB limit"):
        element_accesses(trace)
