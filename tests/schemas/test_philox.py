"""The ``philox`` op family (``schemas/philox.py``): Philox-4x32 against its published
known answers and a plain-Python Philox one element at a time; the family's inference and
the validator's rules for its attrs."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernbench.schemas.ops import OPS, Op
from kernbench.schemas.philox import philox4x32
from kernbench.schemas.policy import KERNBENCH
from kernbench.trace.attrs import problem
from tests.replay.oracle import philox_ref

SEM = OPS[Op.PHILOX].sem
assert SEM is not None


def test_philox_matches_the_published_known_answers() -> None:
    """Philox-4x32-10's known-answer vectors (Random123): all-zero and all-one counter/key."""
    z, f = np.zeros(1, np.uint32), np.full(1, 0xFFFFFFFF, np.uint32)
    assert [int(w[0]) for w in philox4x32(0, z, z)] == [
        0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert [int(w[0]) for w in philox4x32(2**64 - 1, f, f, f, f)] == [
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


SEEDS = [np.asarray(v, dt) for v, dt in ((-3, np.int64), (2**40 + 7, np.int64),
                                         (-(2**31), np.int32), (4_000_000_000, np.uint32),
                                         (-1, np.int8))]


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"{s.dtype}:{int(s)}")
@pytest.mark.parametrize("rounds", [0, 1, 7, 10])
def test_every_word_equals_a_plain_python_philox(seed: np.ndarray, rounds: int) -> None:
    """A seed of any integer type widens as Triton's ``seed.to(tl.uint64)`` (signed types
    sign-extend); 32-bit counters read as their bits, Python integers as their low 32."""
    rng = np.random.default_rng(rounds)
    c0 = rng.integers(-(2**31), 2**31, 6, dtype=np.int64).astype(np.int32)
    c1 = rng.integers(0, 2**32, 6, dtype=np.int64).astype(np.uint32)
    got = philox4x32(seed, c0, c1, 5, 2**32 - 1, rounds)
    for k in range(6):
        want = philox_ref(int(seed), (int(c0[k]), int(c1[k]), 5, 2**32 - 1), rounds)
        assert [int(w[k]) for w in got] == want
    attrs = {"n_rounds": rounds, "word": 2, "scalars": [[3, 5], [4, 2**32 - 1]]}
    assert SEM.infer([seed.shape, c0.shape, c1.shape], [seed.dtype.name, "int32", "uint32"],
                     attrs, KERNBENCH) == ((6,), "uint32")
    np.testing.assert_array_equal(SEM.evaluate([seed, c0, c1, 5, 2**32 - 1], attrs, KERNBENCH),
                                  got[2])


def test_a_block_of_seeds_broadcasts_against_the_counters() -> None:
    seeds = np.array([[1], [-2], [2**33]], np.int64)
    c = np.arange(4, dtype=np.int32)
    got = SEM.evaluate([seeds, c, 0, 0, 0], {"n_rounds": 10, "word": 0,
                                              "scalars": [[2, 0], [3, 0], [4, 0]]}, KERNBENCH)
    assert got.shape == (3, 4) and got.dtype == np.uint32
    assert got.tolist() == [[philox_ref(int(s), (int(x), 0, 0, 0))[0] for x in c]
                            for s in seeds[:, 0]]


@pytest.mark.parametrize(("dtypes", "attrs", "match"), [
    (["int32", "int64"], {"scalars": [[2, 0], [3, 0], [4, 0]]}, "counter c0 must be a 32-bit"),
    (["float32", "int32"], {"scalars": [[2, 0], [3, 0], [4, 0]]}, "seed must be an integer"),
    (["int32"], {"scalars": [[2, 0], [3, 0], [4, 0]]}, "needs 5 arguments"),
    (["int32", "int32"], {"scalars": [[2, 0], [3, 0], [4, 0]], "word": 4}, "word 4"),
    (["int32", "int32"], {"scalars": [[2, 0], [3, 0], [4, 0]], "n_rounds": -1},
     "n_rounds -1"),
    (["int32", "int32"], {"scalars": [[2, 0.5], [3, 0], [4, 0]]}, "c1 0.5 is not an integer"),
])
def test_inference_refuses_what_philox_does_not_take(dtypes, attrs, match) -> None:
    with pytest.raises(ValueError, match=match):
        SEM.infer([(4,)] * len(dtypes), dtypes, attrs, KERNBENCH)


@pytest.mark.parametrize(("attrs", "n_inputs", "match"), [
    ('{"n_rounds":10,"word":0}', 5, None),
    ('{"n_rounds":10,"word":1,"scalars":[[0,-7],[4,4294967295]]}', 3, None),
    ('{"n_rounds":10}', 5, r"attrs lack 'word'"),
    ('{"n_rounds":10,"word":4}', 5, r"attrs 'word' is 4, expected 0, 1, 2 or 3"),
    ('{"n_rounds":-2,"word":0}', 5, r"attrs 'n_rounds' is -2"),
    ('{"n_rounds":10,"word":0,"scalars":[[5,1]]}', 4, r"attrs 'scalars'"),
    ('{"n_rounds":10,"word":0,"scalars":[[1,1.5]]}', 4, r"attrs 'scalars'"),
    ('{"n_rounds":10,"word":0,"scalars":[[1,1],[1,2]]}', 3, r"attrs 'scalars'"),
    ('{"n_rounds":10,"word":0,"scalars":[[1,1]]}', 5, r"imply 4 inputs, it has 5"),
])
def test_the_validator_checks_philox_attrs(attrs: str, n_inputs: int, match: str | None
                                           ) -> None:
    got = problem("philox", attrs, n_inputs)
    if match is None:
        assert got is None
    else:
        assert got is not None and re.search(match, got), got
