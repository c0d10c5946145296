"""Programs on the chip hand over to each other directly (``loop.Chip._hand_over``): a
program that yields or parks runs the loop's turn on its own greenlet and switches to the
program due. What that must keep: a program whose body returns is finished by the main
loop (its slot goes to the next program), and when nothing can run the main loop ends the
recording with a deadlock, not a hang."""

from __future__ import annotations

import pytest

import kernbench as kb
from kernbench import tl
from kernbench.errors import IpcqError


@kb.kernel
def both_send_three(x):
    a = tl.zeros((4,), tl.float32)
    for _ in range(3):  # depth 2: the third send waits for a credit nobody frees
        tl.send("next", a)
    tl.recv("prev", (4,), tl.float32)


def test_programs_that_all_park_end_the_recording_with_a_deadlock(tmp_path) -> None:
    case = kb.Case(name="stuck", kernel=both_send_three, grid=(2,),
                   tensors={"x": kb.tensor((1,), "float32")})
    # each parked program is named with its PE, what it waits in and the kernel's line
    with pytest.raises(IpcqError, match=r"deadlock: no program can make progress \(program 0 "
                                        r"on PE 0 in send at .*test_hand_over.py:\d+; program "
                                        r"1 on PE 1 in send at .*test_hand_over.py:\d+\)$"):
        kb.record(case, tmp_path / "stuck.ktrace", hw="ahbm-v3")
    assert not list(tmp_path.glob("*.ktrace"))


def test_a_ring_wider_than_the_resident_programs_deadlocks_and_says_why(tmp_path) -> None:
    case = kb.build_case("ring-attention", {"n_ranks": 16, "S_kv_per_rank": 256,
                                            "phase": "decode"})
    hw = kb.HwConfig.from_dict({"base": "ahbm-v3", "max_programs_per_pe": 1})
    with pytest.raises(kb.KernelError, match=r"deadlock: no program can make progress "
                                             r"\(program 0 on PE 0 in .* 8 more programs wait "
                                             r"for a slot"):
        kb.record(case, out=tmp_path / "r.ktrace", hw=hw)


@kb.kernel
def chain(x, *, n: int, steps: int):
    acc = tl.zeros((n,), tl.float32)
    for _ in range(steps):
        with tl.scratch_scope():
            tl.copy_to(acc, acc + 1.0)


def test_many_programs_take_turns_through_every_slot(tmp_path) -> None:
    """2,000 programs, 8 PEs: each program started after another one's body returned; a
    program started from a program's greenlet would stack on its depth (RecursionError
    long before the last)."""
    case = kb.Case(name="turns", kernel=chain, grid=(2000,),
                   tensors={"x": kb.tensor((1,), "float32")}, params={"n": 16, "steps": 2})
    trace = kb.record(case, tmp_path / "turns.ktrace", hw="ahbm-v3")
    ops = trace.ops
    assert sorted(ops["program"].unique().to_list()) == list(range(2000))
    # per program: the zeros, then a scope entry, the add, the copy and the scope exit, twice
    assert trace.n_ops == 2000 * (1 + 2 * 4)
