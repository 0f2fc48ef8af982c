"""Link latency at the receiver: every datagram from a peer is held for that peer's one-way
latency, then handed to its QP as if it had just arrived.

The kernel may have no netem to delay packets on the links, yet the round-trip time sets how
much a path holds in flight: without latency a path holds only the few packets its hops
serialize. Holding each datagram at the receive path until arrival + latency gives every
feedback loop (ACKs, NACKs, CNPs, probes, trimmed headers) the round trip of the fabric it
stands for. What it cannot give: queues upstream see flows meet without the offsets the links'
latency would put between them.

Sans-IO, like the protocol: the caller says the time and when to release. Peers with the same
latency share one FIFO (a latency class); arrivals come in time order, so each FIFO is in due
order and only its head needs a timer: the IO driver (driver.py) keeps one wake per class in
its timer heap, the tests' simnet asks `due` as it steps. A peer of latency 0 gets its QP's
own `receive` back from `inlet`: the path as it is without a delay line, at no cost.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable

Receive = Callable[[bytes, float, bool], None]  # a QP's receive(datagram, now, ecn)


class Inlet:
    """Where one QP's datagrams enter its latency class: `hold` stands in for its receive."""

    __slots__ = ("fifo", "key", "receive")

    def __init__(self, fifo: Fifo, key: int, receive: Receive) -> None:
        self.fifo = fifo
        self.key = key  # the QP's number: what `release` reports as touched
        self.receive = receive

    def hold(self, datagram: bytes, now: float, ecn: bool = False) -> None:
        """A datagram arrived now: it is due after the class's latency, its CE mark with it."""
        fifo = self.fifo
        fifo.held.append((now + fifo.latency, self, datagram, ecn))


class Fifo:
    """The datagrams of one latency class, in arrival order (so in due order)."""

    __slots__ = ("latency", "held")

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.held: deque[tuple[float, Inlet, bytes, bool]] = deque()


class DelayLine:
    """One receive path's latency classes (one per distinct latency among its peers)."""

    def __init__(self) -> None:
        self.fifos: list[Fifo] = []
        self._by_latency: dict[float, Fifo] = {}

    def inlet(self, latency: float, key: int, receive: Receive) -> Receive:
        """What the receive path hands `key`'s datagrams to: `receive` itself for no latency,
        else the hold of an Inlet in the class of `latency` seconds."""
        if not latency >= 0:  # NaN too
            raise ValueError(f"a link latency of {latency} s: it must be 0 or more")
        if latency == 0:
            return receive
        fifo = self._by_latency.get(latency)
        if fifo is None:
            fifo = self._by_latency[latency] = Fifo(latency)
            self.fifos.append(fifo)
        return Inlet(fifo, key, receive).hold

    def due(self, k: int) -> float | None:
        """When class k's oldest datagram is due (None: it holds none)."""
        held = self.fifos[k].held
        return held[0][0] if held else None

    def release(self, k: int, now: float, touched: set[int], early: float = 0.0) -> None:
        """Hand every datagram of class k due by `now` + `early` to its receive, in arrival
        order, all at `now`; their keys join `touched`. One whose receive raises is gone (it
        was delivered); the rest stay held for the next release."""
        held = self.fifos[k].held
        until = now + early
        while held and held[0][0] <= until:
            _, inlet, datagram, ecn = held.popleft()
            touched.add(inlet.key)
            inlet.receive(datagram, now, ecn)
