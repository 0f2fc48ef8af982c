"""The header in C (hostagent/_fastio.c) against its definition in Python: wire.HEADER's
struct format, zlib's CRC-32 and the types in TYPE_NAMES."""
from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostagent.protocol import wire

u16, u32 = st.integers(0, 2**16 - 1), st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)


@given(u16, u16, u16, u32, u32, u64, u32, u32, u32, st.binary(max_size=3000))
def test_data_datagram_is_the_struct_format_with_the_payloads_crc(
        flags, ev, length, qp, psn, offset, imm, prev, ts, payload):
    got = wire.data_datagram(flags, ev, length, qp, psn, offset, imm, prev, ts,
                             memoryview(payload))
    want = struct.pack("!BBHHHIIQIIII", 1, wire.DATA, flags, ev, length, qp, psn, offset, imm,
                       prev, ts, zlib.crc32(payload)) + payload
    assert got == want


@given(st.sampled_from(sorted(wire.TYPE_NAMES)), u16, u16, u16, u32, u32, u64, u32, u32, u32,
       u32, st.binary(max_size=100))
def test_decode_gives_every_field_of_the_struct_format(
        kind, flags, ev, length, qp, psn, offset, imm, aux, ts, crc, payload):
    datagram = wire.HEADER.pack(wire.VERSION, kind, flags, ev, length, qp, psn, offset, imm,
                                aux, ts, crc) + payload
    header, rest = wire.decode(datagram)
    assert type(header) is wire.Header
    assert header == wire.Header(kind, flags, ev, length, qp, psn, offset, imm, aux, ts, crc)
    assert bytes(rest) == payload and isinstance(rest, memoryview)
    assert header.trimmed == bool(flags & wire.TRIMMED)


def test_a_field_out_of_range_is_refused_not_truncated():
    with pytest.raises(OverflowError):
        wire.data_datagram(2**16, 0, 0, 0, 0, 0, 0, 0, 0, b"")
    with pytest.raises(OverflowError):
        wire.data_datagram(0, 0, 0, 0, 0, 0, 0, 0, -1, b"")


@pytest.mark.parametrize("kind", [k for k in range(256) if k not in wire.TYPE_NAMES])
def test_decode_refuses_every_type_not_in_type_names(kind):
    datagram = wire.HEADER.pack(wire.VERSION, kind, *[0] * 10)
    with pytest.raises(wire.WireError, match="unknown packet type"):
        wire.decode(datagram)


def test_decode_refuses_short_datagrams_and_other_versions():
    good = wire.control_datagram(wire.ACK, 0, 1, 2, 3)
    with pytest.raises(wire.WireError, match="shorter"):
        wire.decode(good[:-1])
    with pytest.raises(wire.WireError, match="version 2"):
        wire.decode(b"\x02" + good[1:])
    assert wire.decode(good)[0].type == wire.ACK
