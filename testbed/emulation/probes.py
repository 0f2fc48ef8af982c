"""EV probes on the wire, and how one probing round is judged: shared by verification on one
machine (verify.py) and by the server agents (testbed/cluster/server_agent.py), which send
and receive the same datagrams in their own hosts.

A probe is one UDP datagram to port PROBE_PORT carrying (magic, nonce, EV index); the receiver
reads, with IPV6_PKTINFO, the destination address it arrived with (every uSID consumed or not)
and the port it came in on. The nonce keeps a stale probe of an earlier round out.
"""
from __future__ import annotations

import socket
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv6Address

from testbed.fabric.paths import EV
from testbed.fabric.plan import FabricPlan
from testbed.kernel import netns

PROBE_PORT = 7471
MAGIC = b"MRCp"
WINDOW = 256  # probes in flight: far below any port's buffer, so probing itself drops nothing
_PAYLOAD = struct.Struct("!4sII")  # magic, nonce, probe index
_PKTINFO = struct.Struct("16si")  # struct in6_pktinfo


def payload(nonce: int, index: int) -> bytes:
    return _PAYLOAD.pack(MAGIC, nonce, index)


def receiver(pid: int) -> socket.socket:
    """A non-blocking socket on PROBE_PORT in the namespace of `pid`, reporting each
    datagram's destination address and arrival port."""
    sock = netns.socket_in(pid, socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.bind(("::", PROBE_PORT))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def receive(sock: socket.socket,
            nonce: int) -> Iterator[tuple[int, IPv6Address | None, int | None]]:
    """Every probe of round `nonce` waiting on the receiver, until none is left: (EV index,
    destination address it arrived with, arrival ifindex); other datagrams are skipped."""
    while True:
        try:
            data, ancdata, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(_PKTINFO.size))
        except BlockingIOError:
            return
        if len(data) != _PAYLOAD.size:
            continue
        magic, their_nonce, index = _PAYLOAD.unpack(data)
        if magic != MAGIC or their_nonce != nonce:
            continue
        address, ifindex = None, None
        for level, kind, value in ancdata:
            if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO:
                raw, ifindex = _PKTINFO.unpack(value[:_PKTINFO.size])
                address = IPv6Address(raw)
        yield index, address, ifindex


@dataclass(frozen=True)
class ProbeJob:
    """Everything a probing worker needs; workers inherit it through fork."""

    plan: FabricPlan
    pids: dict[str, int]  # host -> pid holding its namespace
    ifindex: dict[tuple[str, int], int]  # (host, plane) -> index of that plane's port
    evs: list[EV]
    timeout: float
    retries: int


@dataclass
class ProbeOutcome:
    seen: dict[int, str | None] = field(default_factory=dict)  # EV index -> problem or None
    sent: Counter[int] = field(default_factory=Counter)  # EV index -> probes sent
    received: Counter[int] = field(default_factory=Counter)  # EV index -> probes received
    datagrams: int = 0


def arrived(job: ProbeJob, out: ProbeOutcome, index: int, host: str,
            address: IPv6Address | None, ifindex: int | None) -> None:
    """Count one probe's arrival into `out` and judge it (where, with which destination, on
    which port): a later good copy of a probe overrides an earlier bad one. An index the job
    does not have is not a probe of it."""
    if not 0 <= index < len(job.evs):
        return
    out.received[index] += 1
    out.datagrams += 1
    ev = job.evs[index]
    problem = None
    if host != ev.dst:
        problem = f"arrived at {host}, not {ev.dst}"
    elif address != job.plan.srv6_address(ev.dst, ev.plane):
        problem = f"arrived with destination {address} (uSIDs not all consumed)"
    elif ifindex != job.ifindex[(ev.dst, ev.plane)]:
        problem = "arrived on the port of another plane"
    if index not in out.seen or out.seen[index] is not None:
        out.seen[index] = problem
