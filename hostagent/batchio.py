"""Many datagrams per system call: recvmmsg(2) and sendmmsg(2) through ctypes.

CPython's socket module has neither. Each call here moves up to `BATCH` datagrams; what a
per-packet `recvmsg`/`sendto` spent per datagram in Python (argument parsing, the address
resolved from its string, the ancillary data turned into a list of tuples) is paid once per
batch, and the per-datagram work left is a few slice copies and one numpy-vectorised pass over
the batch's headers.

The structures are the kernel's on 64-bit Linux (x86_64, aarch64), laid out in numpy arrays of
uint64 whose addresses are handed to libc:

    struct iovec   { void *base; size_t len; }                                  2 words
    struct msghdr  { void *name; socklen_t namelen; struct iovec *iov; size_t iovlen;
                     void *control; size_t controllen; int flags; }             7 words
    struct mmsghdr { struct msghdr hdr; unsigned int msg_len; }                 8 words

Packets stay packets: a batch of sends is still one datagram each on the wire (the qdiscs and
the eBPF queue see every one), unless the caller asks for UDP GSO on a message, and ports
have gso_max_segs 1 so even those are cut before the first qdisc.
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:
    # numpy's stubs declare the buffer protocol for Python 3.12+ only (mypy checks as 3.11)
    from typing_extensions import Buffer

BATCH = 64  # datagrams per call
MAX_DATAGRAM = 65536
CONTROL_SPACE = 24  # CMSG_SPACE(4): one int (IPV6_TCLASS) or one u16 (UDP_SEGMENT) + padding
_SOL_UDP, _UDP_SEGMENT = 17, 103
MSG_DONTWAIT = 0x40
_CMSG = struct.Struct("=Qii")  # cmsg_len, cmsg_level, cmsg_type (then the data, aligned to 8)
_TCLASS_CMSG = struct.Struct("=Qiii")  # the same, then an int: IPV6_TCLASS's data
SMALL_BATCH = 16  # up to this many datagrams, per-item reads beat numpy's fixed cost per call

_libc = ctypes.CDLL(None, use_errno=True)
_recvmmsg = _libc.recvmmsg
_recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
_recvmmsg.restype = ctypes.c_int
_sendmmsg = _libc.sendmmsg
_sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_sendmmsg.restype = ctypes.c_int

if struct.calcsize("P") != 8:  # the layout above; a 32-bit build would need another one
    raise ImportError("hostagent.batchio needs a 64-bit Linux")


def tclass_cmsg(tclass: int) -> bytes:
    """Ancillary data setting one datagram's IPv6 traffic class (DSCP and ECN bits)."""
    return (_CMSG.pack(_CMSG.size + 4, socket.IPPROTO_IPV6, socket.IPV6_TCLASS)
            + struct.pack("=i", tclass)).ljust(CONTROL_SPACE, b"\0")


def gso_cmsg(segment: int) -> bytes:
    """Ancillary data asking the kernel to cut one send into datagrams of `segment` bytes."""
    return (_CMSG.pack(_CMSG.size + 2, _SOL_UDP, _UDP_SEGMENT)
            + struct.pack("=H", segment)).ljust(CONTROL_SPACE, b"\0")


def sockaddr(address: str, port: int) -> bytes:
    """struct sockaddr_in6 of a numeric IPv6 address."""
    return struct.pack("=HHI16sI", socket.AF_INET6, socket.htons(port), 0,
                       socket.inet_pton(socket.AF_INET6, address), 0)


def _addr(a: np.ndarray) -> int:
    return a.ctypes.data


class Receiver:
    """recvmmsg into fixed buffers; one per process is enough (the event loop reads one socket
    at a time and hands every datagram on before the next call)."""

    def __init__(self, batch: int = BATCH, size: int = MAX_DATAGRAM,
                 small: int = SMALL_BATCH) -> None:
        self.batch, self.size = batch, size
        self.small = small  # batches up to this size are read item by item, larger with numpy
        self._data = np.zeros(batch * size, dtype=np.uint8)
        self._view = memoryview(cast("Buffer", self._data))
        self._control = np.zeros((batch, CONTROL_SPACE), dtype=np.uint8)
        self._iov = np.zeros((batch, 2), dtype=np.uint64)
        self._iov[:, 0] = _addr(self._data) + size * np.arange(batch, dtype=np.uint64)
        self._iov[:, 1] = size
        self._hdr = np.zeros((batch, 8), dtype=np.uint64)
        self._hdr[:, 2] = _addr(self._iov) + 16 * np.arange(batch, dtype=np.uint64)
        self._hdr[:, 3] = 1
        self._hdr[:, 4] = _addr(self._control) + CONTROL_SPACE * np.arange(batch,
                                                                            dtype=np.uint64)
        self._hdr_ptr = _addr(self._hdr)
        self._hdr_items = memoryview(cast("Buffer", self._hdr)).cast("B").cast("Q")
        self._control_view = memoryview(cast("Buffer", self._control)).cast("B")
        self.calls = 0  # recvmmsg calls made
        self.datagrams = 0  # datagrams they returned

    def recv(self, fd: int) -> tuple[list[bytes], list[int]]:
        """Up to `batch` datagrams waiting on `fd` (non-blocking), and for each its IPv6
        traffic class (-1 if the socket did not report one). Empty lists when none waits."""
        self._hdr[:, 5] = CONTROL_SPACE  # the kernel writes back what it used
        n = _recvmmsg(fd, self._hdr_ptr, self.batch, MSG_DONTWAIT, None)
        self.calls += 1
        if n <= 0:
            if n < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                err = ctypes.get_errno()
                raise OSError(err, f"recvmmsg: {os.strerror(err)}")
            return [], []
        self.datagrams += n
        view, size = self._view, self.size
        if n <= self.small:  # the common case at low rates: a few datagrams per call
            items, control, unpack = self._hdr_items, self._control_view, _TCLASS_CMSG.unpack_from
            datagrams, classes = [], []
            for i in range(n):
                length = items[8 * i + 7] & 0xFFFFFFFF
                datagrams.append(bytes(view[i * size:i * size + length]))
                _, level, kind, tclass = unpack(control, CONTROL_SPACE * i)
                ok = (items[8 * i + 5] >= 20 and level == socket.IPPROTO_IPV6
                      and kind == socket.IPV6_TCLASS)
                classes.append(tclass if ok else -1)
            return datagrams, classes
        hdr = self._hdr[:n]
        lengths = (hdr[:, 7] & 0xFFFFFFFF).tolist()
        ctl = self._control[:n]
        head = ctl[:, :16].copy().view(np.int32)  # cmsg_len (2 words), level, type
        tclass = ctl[:, 16:20].copy().view(np.int32)[:, 0]
        ok = ((hdr[:, 5] >= 20) & (head[:, 2] == socket.IPPROTO_IPV6)
              & (head[:, 3] == socket.IPV6_TCLASS))
        classes = np.where(ok, tclass, -1).tolist()
        return [bytes(view[i * size:i * size + length]) for i, length in enumerate(lengths)], \
            classes


class Sender:
    """sendmmsg from a staging area: queue datagrams with `add`, send them with `flush`.
    Datagrams whose send fails (a full socket, an unreachable path) are dropped and counted,
    as a per-packet `sendto` error was: the transports recover lost packets."""

    def __init__(self, batch: int = BATCH, arena: int = 1 << 20) -> None:
        self.batch = batch
        self._data = np.zeros(arena, dtype=np.uint8)
        self._view = memoryview(cast("Buffer", self._data))
        self._base = _addr(self._data)
        self._names = np.zeros((batch, 32), dtype=np.uint8)
        self._names_view = memoryview(cast("Buffer", self._names)).cast("B")
        self._control = np.zeros((batch, CONTROL_SPACE), dtype=np.uint8)
        self._control_view = memoryview(cast("Buffer", self._control)).cast("B")
        self._iov = np.zeros((batch, 2), dtype=np.uint64)
        self._hdr = np.zeros((batch, 8), dtype=np.uint64)
        self._hdr[:, 0] = _addr(self._names) + 32 * np.arange(batch, dtype=np.uint64)
        self._hdr[:, 1] = 28
        self._hdr[:, 2] = _addr(self._iov) + 16 * np.arange(batch, dtype=np.uint64)
        self._hdr[:, 3] = 1
        self._hdr[:, 4] = _addr(self._control) + CONTROL_SPACE * np.arange(batch,
                                                                            dtype=np.uint64)
        self._hdr_ptr = _addr(self._hdr)
        # per-message fields written one by one as messages are added: cheaper than numpy
        # array operations when a flush carries only a few (memoryview item writes, ~50 ns)
        self._iov_items = memoryview(cast("Buffer", self._iov)).cast("B").cast("Q")
        self._hdr_items = memoryview(cast("Buffer", self._hdr)).cast("B").cast("Q")
        self._fd = -1
        self._n = 0
        self._used = 0
        self.dropped = 0  # datagrams the kernel refused
        self.calls = 0  # sendmmsg calls made
        self.messages = 0  # messages they carried (a GSO message carries several datagrams)

    def add(self, fd: int, datagram: bytes, name: bytes, control: bytes | None = None) -> None:
        """Queue one message (a datagram, or with `gso_cmsg` several in one) to the socket address
        `name` (see `sockaddr`); sent at the latest when the batch is full or `fd` changes."""
        size = len(datagram)
        if fd != self._fd or self._n == self.batch or self._used + size > len(self._data):
            self.flush()
            self._fd = fd
        i, used = self._n, self._used
        self._view[used:used + size] = datagram
        self._names_view[32 * i:32 * i + 28] = name
        iov, hdr = self._iov_items, self._hdr_items
        iov[2 * i] = self._base + used
        iov[2 * i + 1] = size
        if control:
            self._control_view[CONTROL_SPACE * i:CONTROL_SPACE * (i + 1)] = control
            hdr[8 * i + 5] = CONTROL_SPACE
        else:
            hdr[8 * i + 5] = 0
        self._used = used + size
        self._n = i + 1

    def flush(self) -> None:
        n = self._n
        if n == 0:
            return
        self.messages += n
        done = 0
        while done < n:
            self.calls += 1
            sent = _sendmmsg(self._fd, self._hdr_ptr + 64 * done, n - done, MSG_DONTWAIT)
            if sent < 0:
                if ctypes.get_errno() == errno.EINTR:
                    continue
                sent = 1  # this one failed (full, unreachable...): lost, as with sendto
                self.dropped += 1
            done += sent
        self._n = self._used = 0
