"""The one resource: FIFO, work-conserving, exact integer picoseconds."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernbench.record.machine.shared.server import LoggedServer, Server, ps_per_byte
from tests.record.machine.shared.intervals import conserving, work_conserving

#: rates with one decimal, as a TOML file writes them (GB/s)
RATES = st.integers(1, 40_960).map(lambda tenths: tenths / 10)
REQUESTS = st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 100_000)), max_size=40)


def test_rate_is_read_by_its_decimal_text():
    assert ps_per_byte(819.2) == Fraction(10_000, 8192)  # not 1000 / float(819.2)
    assert ps_per_byte(Fraction(8192, 160)) == Fraction(1000 * 160, 8192)
    with pytest.raises(ValueError, match="positive rate"):
        ps_per_byte(0)


def test_cost_is_the_ceiling_of_bytes_at_the_rate():
    s = Server(819.2)
    assert s.cost(8192) == 10_000  # 8192 B at 819.2 B/ns = 10 ns exactly
    assert s.cost(1) == 2  # 1.220703125 ps, rounded up
    assert Server(3).cost(1) == 334  # 333.33 ps
    assert s.cost(0) == 0


def test_requests_are_served_first_come_first_served_from_when_the_part_is_free():
    s = Server(1)  # 1000 ps per byte
    assert s.serve(0, 2) == 2_000
    assert s.serve(500, 1) == 3_000  # waits for the first
    assert s.serve(10_000, 1) == 11_000  # the part was idle: starts at once
    assert (s.bytes, s.busy_ps, s.free) == (4, 4_000, 11_000)


def test_a_request_of_no_bytes_ends_at_once_and_leaves_the_part_as_it_was():
    s = Server(1)
    s.serve(0, 5)
    assert s.serve(1, 0) == 1
    assert (s.free, s.bytes) == (5_000, 5)


def test_the_log_holds_each_request_and_a_plain_server_keeps_none():
    s = LoggedServer(2)
    s.serve(0, 4)
    s.serve(1_000, 2)
    assert s.log == [(0, 0, 2_000, 4), (1_000, 2_000, 3_000, 2)]
    assert not hasattr(Server(2), "log")


def _run(gbps: float, requests: list[tuple[int, int]]) -> LoggedServer:
    s, t = LoggedServer(gbps), 0
    for dt, n in requests:
        t += dt
        s.serve(t, n)
    return s


@given(RATES, REQUESTS)
def test_no_interval_moves_more_bytes_than_the_rate_allows(gbps, requests):
    s = _run(gbps, requests)
    assert conserving(s.log, Fraction(str(gbps)))
    assert s.bytes == sum(n for _, n in requests)
    assert s.busy_ps == sum(e - st for _, st, e, _ in s.log)


@given(RATES, REQUESTS)
def test_a_request_that_waits_finds_the_part_busy_the_whole_wait(gbps, requests):
    assert work_conserving(_run(gbps, requests).log)


@given(RATES, REQUESTS)
def test_the_same_requests_get_the_same_answers(gbps, requests):
    assert _run(gbps, requests).log == _run(gbps, requests).log
