"""Resident programs hand over in proportion to their ops (ADR-0636): programs waiting for
room in a full engine queue wait as one group, instead of each being re-woken after every op
that grows the queue. The trace is byte for byte what re-waking each of them gives."""

from __future__ import annotations

import hashlib

import pytest

import kernbench as kb
from kernbench import tl
from kernbench.record.machine import resident
from kernbench.record.recorder import record

PROGRAMS, N = 256, 256


@kb.kernel
def row_chain(x, y, *, n: int):
    pid = tl.program_id(0)
    a = tl.load(x + pid * n, (n,), tl.float32)
    b = tl.exp(a * 0.5)
    c = b * b + 1.0
    tl.store(y + pid * n, tl.exp(c - tl.max(c, axis=0)))


def _case() -> kb.Case:
    return kb.Case(name="row-chain", kernel=row_chain, grid=(PROGRAMS,),
                   tensors={"x": kb.tensor((PROGRAMS, N), "float32", init=kb.randn(seed=1)),
                            "y": kb.tensor((PROGRAMS, N), "float32", role="output")},
                   params={"n": N})


def _recorded(tmp_path, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int, int]:
    """(ops.parquet's sha256, ops, programs resumed by the scheduler) of one recording."""
    resumed = [0]
    load = resident._load

    def counting(pe, r):
        resumed[0] += 1
        load(pe, r)

    monkeypatch.setattr(resident, "_load", counting)
    trace = record(_case(), tmp_path / f"{name}.ktrace", hw="ahbm-v2")
    monkeypatch.setattr(resident, "_load", load)
    assert trace.manifest["programs_per_pe"] > 8  # many resident programs share each PE
    digest = hashlib.sha256((trace.path / "ops.parquet").read_bytes()).hexdigest()
    return digest, trace.n_ops, resumed[0]


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        return _recorded(tmp_path_factory.mktemp("grouped"), "grouped", mp)


def test_programs_waiting_for_queue_room_are_resumed_once_per_op_at_most(grouped):
    _, ops, resumed = grouped
    assert resumed <= ops


def test_waiting_as_a_group_writes_the_bytes_of_re_waking_every_waiting_program(
        grouped, tmp_path, monkeypatch):
    put = resident._Schedule.put
    # the scheduler as it was: a program waiting for room is put back at its own clock and,
    # once it is the earliest, resumed to look at the queue again itself
    monkeypatch.setattr(resident._Schedule, "put", lambda self, r, queue: put(self, r, None))
    digest, ops, resumed = _recorded(tmp_path, "rewoken", monkeypatch)
    assert (digest, ops) == grouped[:2]
    assert resumed > 3 * grouped[2]  # the herd this case makes: re-waking costs more
