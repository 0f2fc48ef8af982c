"""The NIC's transmit side: what each port still has to send, so QPs post no faster than the
wire takes their packets.

Why: a QP's timers run from the moment it sends. A real NIC sends a packet when its port is
free and starts the packet's timer then; the host keeps the rest (as work requests) without
dropping or timing any of it. An agent that handed its whole window to the kernel at once
would instead fill its own port's queue: packets would either be dropped by the sender's own
FIFO (a loss no NIC has) or wait there long enough to time out. So each port's backlog is
tracked here (bytes handed over, drained at the port's rate) and a QP may only send what keeps
it under `limit`; the rest waits in the QP until the port has room.
Pure: the driver feeds it the clock.
"""
from __future__ import annotations

from typing import Final

# Ethernet, IPv6 and UDP headers around a transport datagram: what the line carries.
FRAME_OVERHEAD: Final = 14 + 40 + 8
# Line time a port keeps queued when the QPs blocked on it are woken: twice the 4 ms of line a
# port's limit holds at least (testbed/run/traffic.py nic_limits: the agents' timers are about
# a millisecond coarse), so that the port does not run dry while the agent wakes up.
RESERVE_S: Final = 0.008


class Port:
    def __init__(self, rate_bps: int, limit: int) -> None:
        self.rate = rate_bps / 8  # bytes per second
        self.limit = limit  # bytes the port may hold
        self.backlog = 0.0
        self._t = 0.0

    def _drain(self, now: float) -> None:
        self.backlog = max(0.0, self.backlog - (now - self._t) * self.rate)
        self._t = now

    def room(self, now: float) -> float:
        self._drain(now)
        return max(0.0, self.limit - self.backlog)

    def sent(self, nbytes: int, now: float) -> None:
        self._drain(now)
        self.backlog += nbytes

    def wait(self, nbytes: int, now: float) -> float:
        """Seconds until `nbytes` fit."""
        self._drain(now)
        return max(0.0, (self.backlog + nbytes - self.limit) / self.rate)

    def wake_room(self, nbytes: int) -> int:
        """The room a QP blocked on a packet of `nbytes` is woken for: all but `RESERVE_S` of
        the line (and at least one packet) of the limit, and at least its packet. Where the
        limit holds several packet times, as at the low rates many hosts on one machine run at,
        each wake-up then sends several packets instead of one. Not rounded to whole packets:
        a QP spraying over several planes gets its fullest port's room once per plane
        (`Nic.budget`), so at 10 Mbit/s 1.6 packets of room on 4 planes are 6 packets."""
        reserve = max(float(nbytes), self.rate * RESERVE_S)
        return max(nbytes, int(self.limit - reserve))


class Nic:
    """One port per plane, all at the host link's rate."""

    def __init__(self, planes: int, rate_bps: int, limit: int) -> None:
        self.ports = [Port(rate_bps, limit) for _ in range(planes)]

    def budget(self, planes: tuple[int, ...], now: float) -> float:
        """Bytes a QP using `planes` may send now. A QP spraying over several planes spreads
        its packets evenly, so it gets its fullest port's room once per plane."""
        least = float("inf")
        ports = self.ports
        for p in planes:  # Port.room of each, inlined: asked at every kick of every QP
            port = ports[p]
            backlog = port.backlog - (now - port._t) * port.rate
            port.backlog, port._t = (backlog if backlog > 0.0 else 0.0), now
            room = port.limit - port.backlog
            if room < least:
                least = room
        return max(0.0, least) * len(planes)

    def sent(self, plane: int, datagram_bytes: int, now: float, datagrams: int = 1) -> None:
        """`datagrams` datagrams of `datagram_bytes` in all left through `plane`'s port."""
        self.ports[plane].sent(datagram_bytes + datagrams * FRAME_OVERHEAD, now)

    def wait(self, planes: tuple[int, ...], nbytes: int, now: float) -> float:
        """Seconds until a datagram of `nbytes` fits in every port of `planes`."""
        return max(self.ports[p].wait(nbytes + FRAME_OVERHEAD, now) for p in planes)

    def wake(self, planes: tuple[int, ...], nbytes: int, now: float) -> float:
        """Seconds until a QP using `planes`, blocked on a datagram of `nbytes`, is woken: when
        each port has its `Port.wake_room`."""
        line = nbytes + FRAME_OVERHEAD
        return max(self.ports[p].wait(self.ports[p].wake_room(line), now) for p in planes)
