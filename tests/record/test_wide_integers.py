"""The native ``tl`` API holds the version-3 integers too: int64/uint32/uint8/int16 HBM
tensors load, wrap around, convert and store, and replay verifies them against numpy."""

from __future__ import annotations

import numpy as np

import kernbench as kb
from kernbench import tl

N = 64


@kb.kernel
def wide(a, b, c, s, out64, out32, *, n: int):
    x = tl.load(a, (n,), tl.int64)
    y = tl.load(b, (n,), tl.uint32)
    u = tl.load(c, (n,), tl.uint8)
    h = tl.load(s, (n,), tl.int16)
    tl.store(a, x * 3)  # wraps around 2**64
    tl.store(b, y * y)  # wraps around 2**32
    tl.store(c, u + u)  # wraps around 2**8
    tl.store(s, h * h)  # wraps around 2**16
    tl.store(out64, y.to(tl.int64) + x)
    tl.store(out32, (x > 0).to(tl.uint32) + y)


def _case() -> kb.Case:
    rng = np.random.default_rng(0)
    data = {"a": rng.integers(-2**62, 2**62, N, dtype=np.int64),
            "b": rng.integers(0, 2**32, N, dtype=np.uint32),
            "c": rng.integers(0, 256, N, dtype=np.uint8),
            "s": rng.integers(-2**15, 2**15, N, dtype=np.int16)}

    def reference(a, b, c, s):
        with np.errstate(over="ignore"):
            return {"a": a * np.int64(3), "b": b * b, "c": c + c, "s": s * s,
                    "out64": b.astype(np.int64) + a, "out32": (a > 0).astype(np.uint32) + b}

    tensors = {n: kb.tensor((N,), str(v.dtype), init=kb.data(v), role="inout")
               for n, v in data.items()}
    tensors |= {"out64": kb.tensor((N,), "int64", role="output"),
                "out32": kb.tensor((N,), "uint32", role="output")}
    return kb.Case(name="wide-native", kernel=wide, grid=(1,), tensors=tensors,
                   params={"n": N}, reference=reference)


def test_native_kernels_hold_the_version_3_integers_and_replay_verifies_them(tmp_path):
    trace = kb.record(_case(), out=tmp_path / "wide.ktrace")
    assert trace.manifest["schema_version"] == 3
    assert trace.tensors["dtype"].to_list() == ["int64", "uint32", "uint8", "int16", "int64",
                                                "uint32"]
    res = kb.replay(trace.path, case=_case, in_process=True)
    assert res.verified, res.verdict
    assert set(res.outputs) == {"a", "b", "c", "s", "out64", "out32"}
    assert res.outputs["b"].dtype == np.uint32 and res.outputs["out64"].dtype == np.int64
