"""The plain-numpy loops ``kernbench bench`` measures replay against compute what the
kernels compute: bit for bit the replayed output, on the same generated inputs.

Bit for bit holds only for one BLAS thread count on both sides: a float32 GEMM split over
threads sums in another order and rounds differently. The replay child runs with one thread
(``threads=1``, whatever the environment says) and so does the loop here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import kernbench as kb
from kernbench.bench import numpy_baseline as bench_numpy
from kernbench.replay.threads import blas_threads


@pytest.mark.parametrize("case,params,loop", [
    ("gqa-prefill", {"S": 256, "H_q": 16, "H_kv": 2}, bench_numpy.prefill),
    ("gqa-decode", {"S_kv": 2048, "H_q": 16, "H_kv": 2}, bench_numpy.decode),
])
def test_the_numpy_loop_gives_the_replayed_output_bit_for_bit(tmp_path: Path, case: str,
                                                              params: dict, loop) -> None:
    built = kb.build_case(case, params)
    seeds = {n: (t.shape, t.init.seed) for n, t in built.tensors.items() if t.role == "input"}
    inputs = bench_numpy.generate(seeds)
    for name, arr in inputs.items():  # kb.randn, as the trace defines it (bf16 bits)
        spec = built.tensors[name]
        assert arr.dtype == np.uint16
        assert arr.tobytes() == spec.init.make(spec.shape, spec.dtype).tobytes()
    kb.record(built, tmp_path / "t.ktrace")
    res = kb.replay(tmp_path / "t.ktrace", threads=1)
    assert res.verified
    with blas_threads(1):
        got = loop(**inputs, **built.params)
    assert got.dtype == np.uint16 and res.outputs["o"].dtype.name == "bfloat16"
    np.testing.assert_array_equal(got, res.outputs["o"].view(np.uint16))


def test_the_whole_process_baseline_checks_its_loop_against_the_reference() -> None:
    built = kb.build_case("gqa-decode", {"S_kv": 1024, "H_q": 8, "H_kv": 2})
    with blas_threads(1):
        got = bench_numpy.whole(json.loads(bench_numpy.spec_of(built)))
    assert got["ok"] and 0 < got["max_abs_err"] < 2.0 ** -7
