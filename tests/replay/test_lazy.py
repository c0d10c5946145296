"""Message slots by PE index stay bounded in replay (``replay/lazy.py``, ADR-0750): a PE's
``ipcq`` space is sized by what the trace's messages span (the validator measures it) and
made page by page as touched, so a 64-PE gather with 4 MiB slots — PE 0's space spans
(2 + 63) x 2 slots, 520 MiB — holds what its messages use, not what its layout spans."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import kernbench as kb
from kernbench import tl
from kernbench.replay.lazy import LazyBytes, lazy_memory
from kernbench.replay.store import MemoryStore
from kernbench.trace.hw import HwConfig

SLOT = 4096 * 1024
HW64 = HwConfig(n_pe=64)  # ipcq_slot_kib = 4096, ipcq_depth = 2
ROOT_SPAN = (2 + 63) * 2 * SLOT + 64  # PE 63's first slot holds a 64-byte message


@kb.kernel
def gather(x, y, *, n: int):
    p = tl.program_id(0)
    if p > 0:
        tl.send(0, tl.load(x + p * 16, (16,), tl.float32))
    else:
        acc = tl.load(x, (16,), tl.float32)
        for s in range(1, n):
            acc = acc + tl.recv(s, (16,), tl.float32)
        tl.store(y, acc)


def gather_case(n: int = 64) -> kb.Case:
    def reference(x, **_):
        acc = x[:16].copy()
        for s in range(1, n):
            acc = acc + x[16 * s:16 * s + 16]
        return {"y": acc}

    return kb.Case(name="gather", kernel=gather, grid=(n,), params={"n": n},
                   tensors={"x": kb.tensor((16 * n,), "float32", init=kb.randn(seed=2)),
                            "y": kb.tensor((16,), "float32", role="output")},
                   reference=reference)


def test_a_lazy_memory_is_zero_and_takes_no_pages_until_touched() -> None:
    data, valid = lazy_memory(ROOT_SPAN)
    assert data.size == ROOT_SPAN and data.flags.writeable and isinstance(valid, LazyBytes)
    assert data[ROOT_SPAN - 1] == 0 and valid.find(0, 0, 16) == 0
    valid[100:116] = b"\x01" * 16
    assert valid.find(0, 100, 116) == -1 and valid.find(0, 96, 116) == 96
    assert sum(valid[96:120]) == 16


def test_only_a_pe_receiving_by_index_gets_a_larger_ipcq_space() -> None:
    store = MemoryStore(HW64.to_dict(), [], ipcq_bytes={0: ROOT_SPAN})
    root, other = store.memory("ipcq", 0), store.memory("ipcq", 1)
    assert root.size == ROOT_SPAN and isinstance(root.valid, LazyBytes)
    assert other.size == 2 * 2 * SLOT and isinstance(other.valid, bytearray)
    top = store.operand("ipcq", 0, (2 + 63) * 2 * SLOT, (16,), "float32", False)
    assert top.error is None
    top.view[:] = np.arange(16, dtype=np.float32)
    assert np.frombuffer(store.read_bytes("ipcq", 0, top.lo, top.hi), np.float32)[15] == 15


def test_a_64_pe_gather_with_4_mib_slots_replays_verified(tmp_path: Path) -> None:
    trace = kb.record(gather_case(), tmp_path / "g.ktrace", hw=HW64)
    sends = trace.ops.filter(trace.ops["name"].cast(str) == "send")
    assert sends.height == 63
    assert max(s["output"]["addr"] for s in sends.to_dicts()) == (2 + 63) * 2 * SLOT
    assert trace.validation.ipcq_bytes == {0: ROOT_SPAN}
    res = kb.replay(trace.path, case=gather_case, in_process=True)
    assert res.ok and res.verdict.get("reference") is not None, res.verdict


_PEAK = """
import json, resource, sys
import kernbench as kb
out = []
for path in sys.argv[1:]:
    kb.replay(path, in_process=True)
    out.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
print(json.dumps(out))
"""


def test_the_gathers_slots_cost_replay_what_its_messages_use_not_what_they_span(
        tmp_path: Path) -> None:
    small = kb.record(gather_case(2), tmp_path / "small.ktrace", hw=HW64)
    wide = kb.record(gather_case(), tmp_path / "wide.ktrace", hw=HW64)
    peaks = json.loads(subprocess.run(
        [sys.executable, "-c", _PEAK, str(small.path), str(wide.path)], check=True,
        capture_output=True, text=True).stdout)
    # PE 0's space spans 520 MiB (a valid map written whole would be as much again)
    assert peaks[1] - peaks[0] < 64 << 20, peaks
