"""Many datagrams per system call: recvmmsg(2) and sendmmsg(2), in C (hostagent/_fastio.c).

CPython's socket module has neither. Each call here moves up to `BATCH` datagrams; what a
per-packet `recvmsg`/`sendto` spent per datagram in Python (argument parsing, the address
resolved from its string, the ancillary data turned into a list of tuples) is paid once per
batch. The per-datagram work left (copying a QP's datagrams into the staging area, filling the
kernel's structures, making each received datagram a bytes object, reading its traffic class
and handing it to its QP) is C: in Python it cost about 1.4 us per datagram queued and 3.0 us
per datagram received in batches of 64, the system call included.

A received datagram longer than the Receiver's buffer is dropped and counted
(`Receiver.truncated`): handed on cut, a DATA packet would read as a trim. An exception in a
QP's receive is raised once the rest of the batch was delivered: those datagrams were already
read from the socket.

Packets stay packets: a batch of sends is still one datagram each on the wire (the qdiscs and
the eBPF queue see every one), unless the caller asks for UDP GSO on a message, and ports
have gso_max_segs 1 so even those are cut before the first qdisc.

The extension is required, not optional (hostagent/native.py).
"""
from __future__ import annotations

import socket
import struct

from hostagent.native import fastio as _fastio

BATCH = 64  # datagrams per call
CONTROL_SPACE = _fastio.CONTROL_SPACE  # CMSG_SPACE(4): an int (IPV6_TCLASS) or u16 (UDP_SEGMENT)
_CMSG = struct.Struct("=Qii")  # cmsg_len, cmsg_level, cmsg_type (then the data, aligned to 8)

Receiver = _fastio.Receiver  # Receiver(batch, size).dispatch(fd, receivers, now, touched)
Sender = _fastio.Sender  # Sender(batch, arena): send_out(fd, out, names, ...), then flush()


def tclass_cmsg(tclass: int) -> bytes:
    """Ancillary data setting one datagram's IPv6 traffic class (DSCP and ECN bits)."""
    return (_CMSG.pack(_CMSG.size + 4, socket.IPPROTO_IPV6, socket.IPV6_TCLASS)
            + struct.pack("=i", tclass)).ljust(CONTROL_SPACE, b"\0")


def sockaddr(address: str, port: int) -> bytes:
    """struct sockaddr_in6 of a numeric IPv6 address."""
    return struct.pack("=HHI16sI", socket.AF_INET6, socket.htons(port), 0,
                       socket.inet_pton(socket.AF_INET6, address), 0)
