"""The qdisc dump's parser on messages laid out as the kernel sends them (nlmsghdr, tcmsg,
rtattrs padded to 4 bytes), built here field by field rather than by the parser's own code."""
from __future__ import annotations

import errno
import struct

import pytest

from testbed.kernel import qdisc_stats

SEQ = 7


def attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def queue(qlen: int, backlog: int, drops: int) -> bytes:
    return struct.pack("=IIIII", qlen, backlog, drops, 0, 5)  # requeues, overlimits


def qdisc(ifindex: int, kind: bytes, stats: bytes | None, seq: int = SEQ,
          nested: int = 0) -> bytes:
    """An RTM_NEWQDISC: tcmsg, then TCA_KIND, TCA_OPTIONS (some bytes), TCA_STATS2 holding
    TCA_STATS_BASIC and, when given, TCA_STATS_QUEUE."""
    body = struct.pack("=BxxxiIII", 10, ifindex, 0x10000, 0xFFFFFFFF, 1)
    body += attr(1, kind + b"\0") + attr(2, b"\x01\x02\x03")
    inner = attr(1, struct.pack("=QII", 123456, 89, 0))
    if stats is not None:
        inner += attr(3, stats)
    body += attr(7 | nested, inner)
    return struct.pack("=IHHII", 16 + len(body), 36, 0x2, seq, 4242) + body


def control(kind: int, error: int = 0, seq: int = SEQ) -> bytes:
    body = struct.pack("=i", -error) + (b"\0" * 16 if kind == 2 else b"")
    return struct.pack("=IHHII", 16 + len(body), kind, 0x2, seq, 4242) + body


def parsed(buf: bytes) -> tuple[bool, dict[int, tuple[int, int]]]:
    out: dict[int, tuple[int, int]] = {}
    return qdisc_stats.parse(buf, SEQ, out), out


def test_byte_fifos_only_with_backlog_and_drops():
    buf = (qdisc(1003, b"htb", queue(0, 0, 0)) + qdisc(1003, b"bfifo", queue(3, 12600, 17))
           + qdisc(1004, b"clsact", None) + qdisc(1004, b"bfifo", queue(0, 0, 2), nested=0x8000)
           + qdisc(1005, b"pfifo", queue(1, 4200, 9)) + control(3))
    assert parsed(buf) == (True, {1003: (12600, 17), 1004: (0, 2)})


def test_a_dump_goes_on_until_done_and_skips_other_sequences():
    done, out = parsed(qdisc(1003, b"bfifo", queue(1, 4200, 1)) + qdisc(1005, b"bfifo",
                       queue(9, 9, 9), seq=SEQ - 1) + control(3, seq=SEQ - 1))
    assert (done, out) == (False, {1003: (4200, 1)})
    more = qdisc(1004, b"bfifo", queue(0, 0, 0)) + control(3)
    assert qdisc_stats.parse(more, SEQ, out) is True
    assert out == {1003: (4200, 1), 1004: (0, 0)}


def test_a_fifo_without_queue_statistics_is_left_out():
    assert parsed(qdisc(1003, b"bfifo", None) + control(3)) == (True, {})


def test_kernel_errors_raise_with_their_errno():
    with pytest.raises(OSError) as err:
        parsed(qdisc(1003, b"bfifo", queue(0, 0, 0)) + control(2, errno.EPERM))
    assert err.value.errno == errno.EPERM
    with pytest.raises(OSError) as err:
        parsed(control(3, errno.EINTR))
    assert err.value.errno == errno.EINTR
    assert parsed(control(2, 0) + control(3)) == (True, {})  # an ACK is no error


def test_a_truncated_message_raises():
    whole = qdisc(1003, b"bfifo", queue(0, 0, 0))
    with pytest.raises(OSError, match="truncated"):
        parsed(whole[:-8])


def test_the_request_asks_for_a_dump_of_every_qdisc():
    req = qdisc_stats.request(SEQ)
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", req)
    assert (length, kind, flags, seq) == (len(req), 38, 0x301, SEQ)
    assert req[16:] == bytes(20)  # tcmsg: any family, every interface
