"""recvmmsg/sendmmsg in C (hostagent/_fastio.c), on loopback sockets (no root needed)."""
from __future__ import annotations

import socket
import time

import pytest

from hostagent.protocol import wire
from hostagent.runtime import batchio


def _socket(recv_tclass: bool = True, tclass: int | None = None) -> socket.socket:
    """A loopback UDP socket; `tclass`: the traffic class of what it sends (ECN marks)."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    if tclass is not None:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tclass)
    if recv_tclass:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # a few hundred datagrams
    s.bind(("::1", 0))
    s.setblocking(False)
    return s


def _drain(sock: socket.socket, want: int) -> tuple[list[bytes], list[int]]:
    """What arrived, read with the socket module (not the code under test): the datagrams and
    each one's traffic class (-1 when the socket reports none)."""
    got, classes = [], []
    deadline = time.monotonic() + 2
    while len(got) < want and time.monotonic() < deadline:
        try:
            data, ancdata, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(4))
        except BlockingIOError:
            time.sleep(0.001)
            continue
        got.append(data)
        classes.append(next((int.from_bytes(v[:4], "little", signed=True)
                             for level, kind, v in ancdata
                             if (level, kind) == (socket.IPPROTO_IPV6, socket.IPV6_TCLASS)), -1))
    return got, classes


def test_a_batch_reaches_each_destination_with_its_bytes_and_traffic_class():
    a, b, tx = _socket(), _socket(), _socket(tclass=0x02)  # data: ECT(0), as the agents' sockets
    sender = batchio.Sender(batch=8)
    names = {0: batchio.sockaddr("::1", a.getsockname()[1]),
             1: batchio.sockaddr("::1", b.getsockname()[1])}
    out = []
    for k in range(21):  # more than one batch, two destinations interleaved, sizes varying
        datagram = (wire.control_datagram(wire.ACK, 0, k % 2, 5, k) if k % 3 == 0
                    else _data(5, k, 1 + 97 * k))
        out.append((k % 2, datagram))
    sender.send_out(tx.fileno(), out, names, False,
                    batchio.tclass_cmsg(wire.CONTROL_TCLASS), None)
    sender.flush()
    assert sender.calls == 3 and sender.dropped == 0
    for ev, sock in ((0, a), (1, b)):
        want = [(d, wire.CONTROL_TCLASS if d[1] == wire.ACK else 0x02) for e, d in out if e == ev]
        got, classes = _drain(sock, len(want))
        assert list(zip(got, classes)) == want
    for s in (a, b, tx):
        s.close()


def _dispatch(rx: batchio.Receiver, sock: socket.socket, qpns: tuple[int, ...],
              want: int) -> tuple[list[tuple[int, bytes, float, bool]], set[int]]:
    """What `dispatch` hands to the receivers of QPs `qpns`, until `want` were read."""
    got: list[tuple[int, bytes, float, bool]] = []
    receivers = {q: (lambda d, now, ce, q=q: got.append((q, d, now, ce))) for q in qpns}
    touched: set[int] = set()
    deadline = time.monotonic() + 2
    read = 0
    while read < want and time.monotonic() < deadline:
        read += rx.dispatch(sock.fileno(), receivers, 1.5, touched)
    assert read == want
    return got, touched


def test_no_ce_without_the_traffic_class_option_even_after_a_marked_datagram():
    plain, marked, tx = _socket(recv_tclass=False), _socket(), _socket(tclass=0x03)  # CE
    sender, rx = batchio.Sender(), batchio.Receiver()
    to = {0: batchio.sockaddr("::1", marked.getsockname()[1]),
          1: batchio.sockaddr("::1", plain.getsockname()[1])}
    sender.send_out(tx.fileno(), [(0, _data(5, 0, 10))], to, False, b"", None)
    sender.flush()
    assert [g[3] for g in _dispatch(rx, marked, (5,), 1)[0]] == [True]
    # the same receive area, its ancillary data left from the marked one: not read again
    sender.send_out(tx.fileno(), [(1, _data(5, 1, 10))], to, False, b"", None)
    sender.flush()
    assert [g[3] for g in _dispatch(rx, plain, (5,), 1)[0]] == [False]


def test_a_refused_send_is_dropped_and_the_rest_still_go():
    a, tx = _socket(), _socket()
    sender = batchio.Sender()
    name = {0: batchio.sockaddr("::1", a.getsockname()[1])}
    too_big = wire.data_datagram(0, 0, 0, 5, 2, 0, 0, wire.NO_PSN, 0, bytes(70000))  # EMSGSIZE
    out = [(0, _data(5, 1, 10)), (0, too_big), (0, _data(5, 3, 10))]
    sender.send_out(tx.fileno(), out, name, False, b"", None)
    sender.flush()
    assert sender.dropped == 1
    assert _drain(a, 2)[0] == [out[0][1], out[2][1]]


def test_dispatch_on_a_bad_descriptor_raises():
    with pytest.raises(OSError):
        batchio.Receiver().dispatch(10**6, {}, 0.0, set())


def test_counters_say_how_well_batches_batched():
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(batch=4), batchio.Receiver(batch=8)
    name = {0: batchio.sockaddr("::1", a.getsockname()[1])}
    sender.send_out(tx.fileno(), [(0, _data(5, k, 1)) for k in range(6)], name, False, b"",
                    None)
    sender.flush()
    assert (sender.calls, sender.messages, sender.dropped) == (2, 6, 0)
    assert len(_dispatch(rx, a, (5,), 6)[0]) == 6 and rx.datagrams == 6 and rx.calls >= 1


def _data(qpn: int, psn: int, size: int) -> bytes:
    return wire.data_datagram(0, 0, size, qpn, psn, 0, 0, wire.NO_PSN, 0, bytes([psn]) * size)


def test_send_out_sends_a_qps_list_and_counts_data_per_plane():
    a, b, tx = _socket(), _socket(), _socket()
    sender = batchio.Sender()
    names = {0: batchio.sockaddr("::1", a.getsockname()[1]),
             7: batchio.sockaddr("::1", b.getsockname()[1])}
    ack = wire.control_datagram(wire.ACK, 0, 7, 5, 1)
    out = [(0, _data(5, 0, 100)), (7, ack), (0, _data(5, 1, 300)), (7, _data(5, 2, 50))]
    control = batchio.tclass_cmsg(wire.CONTROL_TCLASS)
    sent = sender.send_out(tx.fileno(), out, names, False, control, {0: 1, 7: 0})
    assert sent == [(1, 140 + 340, 2), (0, 90, 1)]  # DATA only, planes in order of appearance
    sender.flush()
    assert sender.messages == 4 and sender.calls == 1
    assert _drain(a, 2) == ([out[0][1], out[2][1]], [0, 0])
    assert _drain(b, 2) == ([ack, out[3][1]], [wire.CONTROL_TCLASS, 0])
    assert sender.send_out(tx.fileno(), [(7, ack)], names, False, control, None) == []


def test_send_out_with_gso_joins_runs_of_data_to_one_ev():
    a, b, tx = _socket(), _socket(), _socket()
    sender = batchio.Sender()
    names = {0: batchio.sockaddr("::1", a.getsockname()[1]),
             1: batchio.sockaddr("::1", b.getsockname()[1])}
    run = [(0, _data(5, k, 960)) for k in range(70)]  # 1000 B each: 64 per message at most
    tail = [(0, _data(5, 70, 10)), (0, _data(5, 71, 960)), (1, _data(5, 72, 960)),
            (0, wire.control_datagram(wire.ACK, 0, 0, 5, 1)), (0, _data(5, 73, 960))]
    out = run + tail
    sender.send_out(tx.fileno(), out, names, True, b"", None)
    sender.flush()
    # 64 | 6 + the short one (a run may end with one shorter datagram) | 1 alone (after a short
    # one) | EV 1 | the ACK | the last DATA
    assert sender.messages == 6 and sender.dropped == 0
    got, _ = _drain(a, 74)
    assert got == [d for ev, d in out if ev == 0]
    assert _drain(b, 1)[0] == [tail[2][1]]


def test_dispatch_hands_each_datagram_to_its_qp_with_its_ce_mark():
    a = _socket()
    senders = {tclass: _socket(tclass=tclass) for tclass in (0x00, 0x02, 0x03)}  # CE: 0x03
    sender, rx = batchio.Sender(), batchio.Receiver()
    name = {0: batchio.sockaddr("::1", a.getsockname()[1])}
    sends = [(_data(5, 0, 10), 0x02), (_data(6, 1, 10), 0x03), (_data(9, 2, 10), 0x00),
             (b"\x01\x01short", 0x03), (_data(5, 3, 10), 0x03)]
    for datagram, tclass in sends:  # each flushed before the next: they arrive in this order
        sender.send_out(senders[tclass].fileno(), [(0, datagram)], name, False, b"", None)
        sender.flush()
    got, touched = _dispatch(rx, a, (5, 6), len(sends))  # all read; QP 9's and the short
    assert got == [(5, sends[0][0], 1.5, False), (6, sends[1][0], 1.5, True),
                   (5, sends[4][0], 1.5, True)]
    assert touched == {5, 6}


@pytest.mark.parametrize(("size", "count", "messages"), [
    (900, 129, 3),  # 64 datagrams per message at most: 64 + 64 + 1
    (1100, 64, 2),  # 65,000 bytes per message at most: 59 + 5
])
def test_gso_messages_stay_within_the_kernels_limits(size, count, messages):
    a, tx = _socket(), _socket()
    sender = batchio.Sender()
    name = {0: batchio.sockaddr("::1", a.getsockname()[1])}
    out = [(0, _data(5, k, size - wire.HEADER_SIZE)) for k in range(count)]
    sender.send_out(tx.fileno(), out, name, True, b"", None)
    sender.flush()
    assert (sender.messages, sender.dropped) == (messages, 0)
    assert _drain(a, count)[0] == [d for _, d in out]


def test_batches_of_one_are_one_system_call_per_datagram():
    """HOSTAGENT_BATCH=0 (the driver's comparison mode) is batches of one."""
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(batch=1), batchio.Receiver(batch=1)
    name = {0: batchio.sockaddr("::1", a.getsockname()[1])}
    out = [(0, _data(5, k, 100)) for k in range(5)]
    sender.send_out(tx.fileno(), out, name, False, b"", None)
    sender.flush()
    assert (sender.calls, sender.messages) == (5, 5)
    got, _ = _dispatch(rx, a, (5,), 5)
    assert [d for _, d, _, _ in got] == [d for _, d in out] and rx.calls >= 5


def _gso_send(out: list[tuple[int, bytes]]) -> tuple[batchio.Sender, list[bytes]]:
    """`out` sent with GSO to one loopback socket: the sender, and what the receiver read."""
    a, tx = _socket(), _socket()
    sender = batchio.Sender()
    sender.send_out(tx.fileno(), out, {0: batchio.sockaddr("::1", a.getsockname()[1])}, True,
                    b"", None)
    sender.flush()
    got = _drain(a, len(out))[0]  # a datagram cut in pieces: its first piece differs from it
    a.close()
    tx.close()
    return sender, got


def test_gso_does_not_join_a_full_datagram_behind_a_short_one():
    """The kernel cuts a GSO message at the first datagram's size: a full datagram behind a
    short one would arrive in pieces, so it leaves in a message of its own."""
    out = [(0, _data(5, 0, 100)), (0, _data(5, 1, 960))]
    sender, got = _gso_send(out)
    assert [len(d) for d in got] == [len(d) for _, d in out] and got == [d for _, d in out]
    assert (sender.messages, sender.dropped) == (2, 0)


def test_gso_joins_datagrams_of_one_size_and_a_shorter_last_one():
    out = [(0, _data(5, 0, 960)), (0, _data(5, 1, 960)), (0, _data(5, 2, 100))]
    sender, got = _gso_send(out)
    assert [len(d) for d in got] == [len(d) for _, d in out] and got == [d for _, d in out]
    assert (sender.messages, sender.dropped) == (1, 0)


def test_gso_does_not_join_a_longer_datagram_behind_the_first():
    out = [(0, _data(5, 0, 960)), (0, _data(5, 1, 961)), (0, _data(5, 2, 961))]
    sender, got = _gso_send(out)
    assert [len(d) for d in got] == [len(d) for _, d in out] and got == [d for _, d in out]
    assert (sender.messages, sender.dropped) == (2, 0)  # the first alone, then the two longer


@pytest.mark.parametrize("cls", [batchio.Receiver, batchio.Sender])
def test_a_second_init_is_refused_and_the_object_keeps_working(cls):
    obj = cls(batch=2)
    with pytest.raises(RuntimeError, match="already initialised"):
        obj.__init__(batch=8)
    assert obj.batch == 2
    a, tx = _socket(), _socket()
    sender = obj if cls is batchio.Sender else batchio.Sender()
    rx = obj if cls is batchio.Receiver else batchio.Receiver()
    out = [(0, _data(5, k, 100)) for k in range(3)]
    sender.send_out(tx.fileno(), out, {0: batchio.sockaddr("::1", a.getsockname()[1])}, False,
                    b"", None)
    sender.flush()
    got, _ = _dispatch(rx, a, (5,), 3)
    assert [d for _, d, _, _ in got] == [d for _, d in out]


@pytest.mark.parametrize("cls", [batchio.Receiver, batchio.Sender])
def test_an_object_whose_init_failed_or_never_ran_refuses_to_work(cls):
    obj = cls.__new__(cls)
    with pytest.raises(ValueError):
        obj.__init__(batch=0)
    with pytest.raises(RuntimeError, match="not initialised"):
        if cls is batchio.Receiver:
            obj.dispatch(0, {}, 0.0, set())
        else:
            obj.send_out(0, [(0, b"")], {0: bytes(28)}, False, b"", None)
    obj.__init__(batch=3)  # a failed __init__ left nothing behind: a good one still runs
    assert obj.batch == 3


def test_a_receive_area_whose_size_overflows_is_refused():
    with pytest.raises(ValueError, match="does not fit"):
        batchio.Receiver(batch=2**16, size=2**48)  # 2**64 bytes: 0 once wrapped to 64 bits


def test_a_datagram_longer_than_the_receive_buffer_is_dropped_and_counted():
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(), batchio.Receiver(size=200)
    fits, longer = _data(5, 0, 200 - wire.HEADER_SIZE), _data(5, 1, 201 - wire.HEADER_SIZE)
    out = [(0, fits), (0, longer), (0, _data(5, 2, 10))]
    sender.send_out(tx.fileno(), out, {0: batchio.sockaddr("::1", a.getsockname()[1])}, False,
                    b"", None)
    sender.flush()
    got, _ = _dispatch(rx, a, (5,), 3)  # all three read from the socket
    assert [d for _, d, _, _ in got] == [fits, out[2][1]]
    assert (rx.datagrams, rx.truncated) == (3, 1)


def test_an_exception_in_a_receive_is_raised_after_the_whole_batch_was_delivered(monkeypatch):
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(), batchio.Receiver()
    sent = [(q, _data(q, k, 10)) for k, q in enumerate((6, 5, 6, 5, 6))]  # (QP, datagram)
    out = [(0, d) for _, d in sent]
    sender.send_out(tx.fileno(), out, {0: batchio.sockaddr("::1", a.getsockname()[1])}, False,
                    b"", None)
    sender.flush()  # over loopback, in the socket's queue when this returns: one batch

    def fails(datagram: bytes, now: float, ce: bool) -> None:
        raise ValueError(f"PSN {wire.decode(datagram)[0].psn}")

    got: list[bytes] = []
    unraisable: list[BaseException | None] = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: unraisable.append(u.exc_value))
    touched: set[int] = set()
    with pytest.raises(ValueError, match="PSN 1"):  # the first one raised
        rx.dispatch(a.fileno(), {5: fails, 6: lambda d, now, ce: got.append(d)}, 0.0, touched)
    assert got == [d for q, d in sent if q == 6]  # none lost
    assert touched == {6}
    assert [str(e) for e in unraisable] == ["PSN 3"]  # the later one: reported, not lost


def test_a_receive_that_dispatches_again_is_refused(monkeypatch):
    """The batch being handed out lives in the Receiver's buffers: a nested dispatch would
    overwrite the datagrams not yet delivered."""
    monkeypatch.setattr("sys.unraisablehook", lambda u: None)  # the second receive's refusal
    a, tx = _socket(), _socket()
    sender, rx = batchio.Sender(), batchio.Receiver()
    out = [(0, _data(5, k, 10)) for k in range(2)]
    sender.send_out(tx.fileno(), out, {0: batchio.sockaddr("::1", a.getsockname()[1])}, False,
                    b"", None)
    sender.flush()
    got: list[bytes] = []

    def nested(datagram: bytes, now: float, ce: bool) -> None:
        got.append(datagram)
        rx.dispatch(a.fileno(), receivers, now, set())

    receivers = {5: nested}
    with pytest.raises(RuntimeError, match="dispatch called from a receive"):
        rx.dispatch(a.fileno(), receivers, 0.0, set())
    assert got == [d for _, d in out]
