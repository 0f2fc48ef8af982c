"""recvmmsg/sendmmsg in C (hostagent/_fastio.c), on loopback sockets (no root needed)."""
from __future__ import annotations

import socket
import time

import pytest

from hostagent import batchio


def _socket(recv_tclass: bool = True) -> socket.socket:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    if recv_tclass:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    s.bind(("::1", 0))
    s.setblocking(False)
    return s


def _drain(rx: batchio.Receiver, sock: socket.socket, want: int):
    got, classes = [], []
    deadline = time.monotonic() + 2
    while len(got) < want and time.monotonic() < deadline:
        d, c = rx.recv(sock.fileno())
        got += d
        classes += c
    return got, classes


def test_a_batch_reaches_each_destination_with_its_bytes_and_traffic_class():
    a, b, tx = _socket(), _socket(), _socket()
    sender, rx = batchio.Sender(batch=8), batchio.Receiver(batch=4)
    names = [batchio.sockaddr("::1", s.getsockname()[1]) for s in (a, b)]
    sent = []
    for k in range(21):  # more than one batch, two destinations interleaved, sizes varying
        data = bytes([k]) * (1 + 97 * k)
        tclass = (48 << 2) if k % 3 == 0 else 0x03  # CS6, or ECN CE
        sender.add(tx.fileno(), data, names[k % 2], batchio.tclass_cmsg(tclass))
        sent.append((k % 2, data, tclass))
    sender.flush()
    assert sender.calls == 3 and sender.dropped == 0
    for i, sock in enumerate((a, b)):
        want = [(d, t) for dst, d, t in sent if dst == i]
        got, classes = _drain(rx, sock, len(want))
        assert list(zip(got, classes)) == want
    assert rx.recv(a.fileno()) == ([], [])
    for s in (a, b, tx):
        s.close()


def test_no_traffic_class_reported_without_the_option_and_a_plain_send():
    a, tx = _socket(recv_tclass=False), _socket()
    sender, rx = batchio.Sender(), batchio.Receiver()
    marked = _socket()  # first a datagram with a class, so that its cmsg is still in the area
    sender.add(tx.fileno(), b"ce", batchio.sockaddr("::1", marked.getsockname()[1]),
               batchio.tclass_cmsg(0x03))
    sender.flush()
    assert _drain(rx, marked, 1) == ([b"ce"], [0x03])
    sender.add(tx.fileno(), b"plain", batchio.sockaddr("::1", a.getsockname()[1]))
    sender.flush()
    assert _drain(rx, a, 1) == ([b"plain"], [-1])


def test_gso_message_arrives_as_separate_datagrams():
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(), batchio.Receiver()
    payload = b"".join(bytes([k]) * 1000 for k in range(5)) + b"tail"
    sender.add(tx.fileno(), payload, batchio.sockaddr("::1", a.getsockname()[1]),
               batchio.gso_cmsg(1000))
    sender.flush()
    got, _ = _drain(rx, a, 6)
    assert got == [bytes([k]) * 1000 for k in range(5)] + [b"tail"]


def test_a_refused_send_is_dropped_and_the_rest_still_go():
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(), batchio.Receiver()
    name = batchio.sockaddr("::1", a.getsockname()[1])
    sender.add(tx.fileno(), b"1", name)
    sender.add(tx.fileno(), b"x" * 70000, name)  # too large for UDP: EMSGSIZE
    sender.add(tx.fileno(), b"3", name)
    sender.flush()
    assert sender.dropped == 1
    assert _drain(rx, a, 2)[0] == [b"1", b"3"]


def test_recv_on_a_bad_descriptor_raises():
    with pytest.raises(OSError):
        batchio.Receiver().recv(10**6)


def test_counters_say_how_well_batches_batched():
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(batch=4), batchio.Receiver(batch=8)
    name = batchio.sockaddr("::1", a.getsockname()[1])
    for k in range(6):
        sender.add(tx.fileno(), bytes([k]), name)
    sender.flush()
    assert (sender.calls, sender.messages, sender.dropped) == (2, 6, 0)
    assert len(_drain(rx, a, 6)[0]) == 6 and rx.datagrams == 6 and rx.calls >= 1
