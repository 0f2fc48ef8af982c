"""The byte FIFOs' backlog and drops in one node, from a netlink qdisc dump read with struct.

Telemetry reads them from every node while the traffic runs. pyroute2 decodes every attribute
of every qdisc in the dump (htb's options and rate tables, clsact, the FIFOs) into Python
objects, about 2 ms a router; this reads the two attributes it needs (the kind, and the queue
statistics of TCA_STATS2) from the same dump and skips the rest, so a sweep of ref-64's 112
nodes costs a few ms of CPU instead of a fifth of a second (`bench/telemetry.py` times both).
The parsing is pure (`parse`); `QueueStats` holds the node's socket.
"""
from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator

from testbed.kernel import netns

NETLINK_ROUTE = 0
NLMSG_ERROR = 2
NLMSG_DONE = 3
RTM_NEWQDISC = 36
RTM_GETQDISC = 38
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
TCA_KIND = 1
TCA_STATS2 = 7
TCA_STATS_QUEUE = 3
_TYPE_MASK = 0x3FFF  # an attribute's type without NLA_F_NESTED and NLA_F_NET_BYTEORDER
FIFO_KIND = b"bfifo"  # the byte FIFO behind each port's shaper (testbed/kernel/shaping.py)

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
_TCMSG = struct.Struct("=BxxxiIII")  # tcmsg: family, ifindex, handle, parent, info
_ATTR = struct.Struct("=HH")  # rtattr: length, type
_QUEUE = struct.Struct("=IIIII")  # gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
_ERRNO = struct.Struct("=i")
TIMEOUT_S = 5.0  # a dump the kernel has not answered by then is an error, not a hung sampler


def request(seq: int) -> bytes:
    """RTM_GETQDISC, dump of every qdisc of the namespace."""
    return (_HEADER.pack(_HEADER.size + _TCMSG.size, RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP,
                         seq, 0) + _TCMSG.pack(0, 0, 0, 0, 0))


def _attrs(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(type, payload start, payload end) of each attribute in buf[start:end]."""
    while start + _ATTR.size <= end:
        length, kind = _ATTR.unpack_from(buf, start)
        if length < _ATTR.size or start + length > end:
            return
        yield kind & _TYPE_MASK, start + _ATTR.size, start + length
        start += (length + 3) & ~3


def _fifo_stats(buf: bytes, start: int, end: int) -> tuple[int, int] | None:
    """(backlog bytes, drops) of one RTM_NEWQDISC's attributes, if it is a byte FIFO."""
    kind = queue = None
    for attr, a, b in _attrs(buf, start, end):
        if attr == TCA_KIND:
            kind = buf[a:b].rstrip(b"\0")
        elif attr == TCA_STATS2:
            for sub, c, d in _attrs(buf, a, b):
                if sub == TCA_STATS_QUEUE and d - c >= _QUEUE.size:
                    queue = _QUEUE.unpack_from(buf, c)
    if kind != FIFO_KIND or queue is None:
        return None
    return queue[1], queue[2]


def parse(buf: bytes, seq: int, out: dict[int, tuple[int, int]]) -> bool:
    """Add to `out` (ifindex -> (backlog bytes, drops)) the byte FIFOs of one datagram of the
    dump answering `seq`; messages of other sequence numbers (a dump a failed read left
    behind) are skipped. True once the dump is done. An error the kernel answered raises
    OSError with its errno."""
    offset = 0
    while offset + _HEADER.size <= len(buf):
        length, kind, _flags, got, _port = _HEADER.unpack_from(buf, offset)
        if length < _HEADER.size or offset + length > len(buf):
            raise OSError(0, f"a truncated netlink message ({length} B at {offset})")
        body, end = offset + _HEADER.size, offset + length
        offset += (length + 3) & ~3
        if got != seq:
            continue
        if kind in (NLMSG_ERROR, NLMSG_DONE):
            errno = -_ERRNO.unpack_from(buf, body)[0] if end - body >= _ERRNO.size else 0
            if errno:
                raise OSError(errno, f"qdisc dump: {os.strerror(errno)}")
            if kind == NLMSG_DONE:
                return True
        elif kind == RTM_NEWQDISC and end - body >= _TCMSG.size:
            ifindex = _TCMSG.unpack_from(buf, body)[1]
            stats = _fifo_stats(buf, body + _TCMSG.size, end)
            if stats is not None:
                out[ifindex] = stats
    return False


class QueueStats:
    """A raw netlink socket in the namespace of process `pid`; `close()` when done (it pins
    the namespace)."""

    def __init__(self, pid: int) -> None:
        self._sock = netns.socket_in(pid, socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        self._sock.settimeout(TIMEOUT_S)
        self._seq = 0

    def read(self) -> dict[int, tuple[int, int]]:
        """Per port (ifindex): backlog bytes and drops of its byte FIFO."""
        self._seq += 1
        self._sock.send(request(self._seq))
        out: dict[int, tuple[int, int]] = {}
        while not parse(self._sock.recv(1 << 16), self._seq, out):
            pass
        return out

    def close(self) -> None:
        self._sock.close()
