"""Property: random kernels that decide on random data record and replay verified, on every
preset (ahbm-v3: the chip-wide machine), and every guard row holds the value numpy computes
for its condition (ADR-0840, ADR-0843)."""

from __future__ import annotations

import json
import operator

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import kernbench as kb
from kernbench import tl

REDUCE = {"sum": (tl.sum, np.sum), "max": (tl.max, np.max), "min": (tl.min, np.min)}
COMPARE = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le,
           "eq": operator.eq, "ne": operator.ne}


@kb.kernel
def decides(x, y, *, n: int, red: str, cmp: str, thr: int):
    """``if reduce(x) CMP thr`` picks a branch; ``range(int(clip(x[0], 0, 3)))`` repeats a
    step."""
    pid = tl.program_id(0)
    a = tl.load(x + pid * n, (n,), tl.int32)
    s = REDUCE[red][0](a, axis=0)
    if COMPARE[cmp](s, thr):
        out = a * 2
    else:
        out = a + 1
    first = tl.load(x + pid * n, (1,), tl.int32)
    for _ in range(int(tl.minimum(tl.maximum(first, 0), 3))):
        out = out + 3
    tl.store(y + pid * n, out)


def expected(x: np.ndarray, red: str, cmp: str, thr: int) -> tuple[list, np.ndarray]:
    """(each program's guard values in order, the output) by numpy."""
    guards, out = [], np.empty_like(x)
    for p, row in enumerate(x):
        taken = bool(COMPARE[cmp](REDUCE[red][1](row), thr))
        k = min(max(int(row[0]), 0), 3)
        guards.append([int(taken), k])
        out[p] = (row * 2 if taken else row + 1) + 3 * k
    return guards, out


@given(x=st.integers(1, 4).flatmap(lambda p: st.lists(
           st.lists(st.integers(-20, 20), min_size=8, max_size=8), min_size=p, max_size=p)),
       red=st.sampled_from(sorted(REDUCE)), cmp=st.sampled_from(sorted(COMPARE)),
       thr=st.integers(-40, 40), hw=st.sampled_from(["ahbm-v1", "ahbm-v2", "ahbm-v3"]))
def test_random_decisions_on_random_data_replay_and_equal_numpy(tmp_path_factory, x, red, cmp,
                                                                 thr, hw):
    data = np.array(x, np.int32)
    guards, out = expected(data, red, cmp, thr)

    def case() -> kb.Case:
        return kb.Case(name="decides", kernel=decides, grid=(len(data),),
                       tensors={"x": kb.tensor(data.shape, "int32", init=kb.data(data)),
                                "y": kb.tensor(data.shape, "int32", role="output")},
                       params={"n": data.shape[1], "red": red, "cmp": cmp, "thr": thr},
                       reference=lambda x: {"y": out})

    path = tmp_path_factory.mktemp("p") / "t.ktrace"
    trace = kb.record(case(), path, hw=hw)
    rows = trace.ops.filter(trace.ops["name"].cast(str) == "guard").sort("op_id").to_dicts()
    got = [[json.loads(r["attrs"])["bits"] for r in rows if r["program"] == p]
           for p in range(len(data))]
    assert got == guards
    res = kb.replay(trace.path, case=case, in_process=True)
    assert res.ok, res.verdict
