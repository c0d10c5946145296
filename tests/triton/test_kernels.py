"""Unmodified Triton kernels record (Phase 1), replay (Phase 2) and match numpy."""

from __future__ import annotations

import numpy as np

from kernbench.testing import assert_check_ok
from tests.triton.conftest import ALL, Entry, params


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype.kind in "biu":
        return np.array_equal(got, want)
    tol = 4e-3 if got.dtype == np.float16 else 1e-5
    return np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


@params(ALL)
def test_triton_kernel_records_replays_and_matches_numpy(entry: Entry, replayed) -> None:
    trace, res = replayed(entry)
    assert_check_ok(trace)
    assert res.verified, res.verdict
    want = entry.make_launch().expected()
    assert set(res.outputs) == set(want)  # the outputs are the arrays the kernel stores to
    for name, expected in want.items():
        got = res.outputs[name]
        assert got.shape == expected.shape and got.dtype == expected.dtype, name
        assert _close(got, expected), (name, float(np.max(np.abs(
            got.astype(np.float64) - expected.astype(np.float64)))))


def test_scatters_by_loaded_indices_in_two_programs_are_a_race_only_the_data_can_clear(
        tmp_path) -> None:
    """A permutation by loaded indices: the replay verifies it, and the race detector, which
    sees only that both programs write somewhere in ``out``, says so and why."""
    import re

    import kernbench as kb
    from kernbench.analyze.race import hazards
    from tests.triton.kernels import permute

    trace = kb.record(permute.case(), out=tmp_path / "p.ktrace")
    assert kb.replay(trace.path, case=permute.case, in_process=True).verified
    found = hazards(trace.ops)
    assert found["hazard"].to_list() == ["race_ww"]
    assert re.search(r"op \d+ and op \d+ address the tensor by loaded indices",
                     found["message"][0])
