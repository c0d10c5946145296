"""The links between PEs: a ``Server`` at ``link_gbps`` per link of the topology
(``trace/topology.py``: one direction of a wire), and cut-through routing over them.

A message of ``n`` bytes sent at ``t`` over the route's ``h`` links is served by every one
of them FIFO from ``t`` (cut-through: the links of a route stream the same bytes at once,
not one after the other); the source buffer is read until the last of them has served it
(``occupied_until``), and the message arrives ``h * link_latency_ns`` later. With no
other traffic that is ``t + ceil(n * 1000 / link_gbps) + h * link_latency`` (the closed
form: ``h`` latencies plus the bytes at the slowest link's share). A message to its own PE
crosses no link and arrives at ``t``. ``dst`` is a PE, or ``"next"``/``"prev"`` as
``tl.send`` takes them: on a ring those cross their own neighbour link
(``trace.topology.route_named``).

Every link starts serving at ``t``, even a link the message's head reaches only after the
links before it: the per-hop latency is added once, at the end. That keeps a route's cost
one max over its links; a link shared by two routes still serves their bytes one after
the other.
"""

from __future__ import annotations

from kernbench.record.machine.shared.server import Server
from kernbench.trace.hw import HwConfig
from kernbench.trace.topology import Link, link_name, links, route, route_named

#: the ``binding_link`` of a message that crosses no link (to its own PE)
NO_LINK: Link | None = None


class Fabric:
    """The chip's links: ``send(t, src, dst, nbytes)``."""

    __slots__ = ("topology", "n", "latency_ps", "servers", "_routes")

    def __init__(self, hw: HwConfig, n_pe: int | None = None,
                 server: type[Server] = Server) -> None:
        self.topology = hw.topology
        self.n = hw.n_pe if n_pe is None else n_pe
        self.latency_ps = hw.link_latency_ns * 1000
        self.servers: dict[Link, Server] = {
            link: server(hw.link_gbps, self.resource(link))
            for link in links(self.topology, self.n)}
        self._routes: dict[tuple[int, int | str], tuple[tuple[Link, Server], ...]] = {}

    def resource(self, link: Link) -> str:
        """A link as ``shared.parquet`` names it: ``link.pe3->pe4``, ``link.pe3->switch``."""
        return "link." + link_name(link, self.n)

    def path(self, src: int, dst: int | str) -> tuple[Link, ...]:
        """The links a message from PE ``src`` to ``dst`` crosses: a PE index, or
        ``"next"``/``"prev"`` as ``tl.send`` takes them (``trace.topology.route_named``)."""
        return tuple(link for link, _ in self._route(src, dst))

    def _route(self, src: int, dst: int | str) -> tuple[tuple[Link, Server], ...]:
        got = self._routes.get((src, dst))
        if got is None:
            found = (route_named(self.topology, self.n, src, dst) if isinstance(dst, str)
                     else route(self.topology, self.n, src, dst))
            got = self._routes[(src, dst)] = tuple((link, self.servers[link])
                                                   for link in found)
        return got

    def send(self, t: int, src: int, dst: int | str, nbytes: int
             ) -> tuple[int, int, int, Link | None]:
        """Send ``nbytes`` from PE ``src`` to ``dst`` (a PE, or ``"next"``/``"prev"``) at
        ``t``: ``(arrival, ideal_arrival, occupied_until, binding_link)``.
        ``binding_link`` is the link that served the bytes last (the nearest the source of
        a tie; ``NO_LINK`` for a message that crosses no link)."""
        hops = self._route(src, dst)
        if not hops:
            return t, t, t, NO_LINK
        occupied, binding = t, hops[0][0]
        for link, server in hops:
            end = server.serve(t, nbytes)
            if end > occupied:
                occupied, binding = end, link
        flight = len(hops) * self.latency_ps
        ideal = t + hops[0][1].cost(nbytes) + flight
        return occupied + flight, ideal, occupied, binding
