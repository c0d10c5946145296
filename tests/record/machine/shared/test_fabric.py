"""The links: cut-through over the route, a Server per link."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernbench.errors import BadInputError
from kernbench.record.machine.shared.fabric import NO_LINK, Fabric
from kernbench.record.machine.shared.server import LoggedServer
from kernbench.trace.hw import PRESETS, TOPOLOGIES, HwConfig
from kernbench.trace.topology import route
from tests.record.machine.shared.intervals import conserving, work_conserving

V3 = PRESETS["ahbm-v3"]  # link_gbps 64 (its link_latency_ns, 20, is pinned to 1000 below)


def _hw(topology: str, n: int = 8) -> HwConfig:
    return dataclasses.replace(V3, topology=topology, n_pe=n, link_latency_ns=1000)


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_message_over_h_hops_arrives_h_latencies_plus_its_bytes_later(topology):
    fabric = Fabric(_hw(topology, 16))
    for dst in range(1, 16):
        hops = len(route(topology, 16, 0, dst))
        t = 200_000 * dst  # after every earlier message: no traffic in the way
        arrival, ideal, occupied, binding = fabric.send(t, 0, dst, 6_400)
        assert occupied == t + 100_000  # 6400 B at 64 GB/s
        assert arrival == ideal == occupied + hops * 1_000_000
        assert binding == route(topology, 16, 0, dst)[0]


def test_the_hop_counts_are_the_topologies_shortest_paths():
    got = {t: max(len(route(t, 8, 0, d)) for d in range(8)) for t in TOPOLOGIES}
    # ring: one way round; bidir: half; 2 x 4 mesh: 1 + 3; torus: 1 + 2; switch: in and out
    assert got == {"ring": 7, "bidir_ring": 4, "mesh2d": 4, "torus2d": 3, "switch": 2}


def test_two_messages_sharing_a_link_take_it_one_after_the_other():
    fabric = Fabric(_hw("switch"))  # every message crosses pe->switch and switch->pe
    a = fabric.send(0, 0, 1, 6_400)
    b = fabric.send(0, 2, 1, 6_400)  # shares switch->pe1 only
    assert a[2] == 100_000 and b[2] == 200_000
    assert b[3] == (8, 1) and fabric.resource(b[3]) == "link.switch->pe1"
    assert b[0] - b[1] == 100_000  # waited one message for the shared link


def test_next_and_prev_take_their_own_link_on_a_ring():
    fabric = Fabric(_hw("ring"))
    assert fabric.path(0, "prev") == ((0, 7),)  # back one hop, as on ahbm-v2
    assert fabric.path(0, 7) == tuple((p, p + 1) for p in range(7))  # by index: round
    assert Fabric(_hw("torus2d")).path(0, "prev") == route("torus2d", 8, 0, 7)
    with pytest.raises(BadInputError, match="unknown direction 'up'"):
        fabric.send(0, 0, "up", 1)


def test_a_message_to_its_own_pe_crosses_nothing():
    assert Fabric(_hw("torus2d")).send(5, 3, 3, 100) == (5, 5, 5, NO_LINK)
    assert Fabric(_hw("ring", 1)).send(5, 0, "next", 100) == (5, 5, 5, NO_LINK)


SENDS = st.lists(st.tuples(st.integers(0, 50_000), st.integers(0, 7), st.integers(0, 7),
                           st.integers(0, 10_000)), max_size=25)


def _run(topology: str, sends: list[tuple[int, int, int, int]]):
    fabric, t, answers = Fabric(_hw(topology), server=LoggedServer), 0, []
    for dt, src, dst, n in sends:
        t += dt
        answers.append(fabric.send(t, src, dst, n))
    return fabric, answers


@given(st.sampled_from(TOPOLOGIES), SENDS)
def test_every_link_conserves_and_never_idles_while_a_message_waits(topology, sends):
    fabric, answers = _run(topology, sends)
    for server in fabric.servers.values():
        assert conserving(server.log, Fraction(64)) and work_conserving(server.log)
    for arrival, ideal, occupied, _ in answers:
        assert arrival >= ideal and arrival >= occupied
    assert _run(topology, sends)[1] == answers
