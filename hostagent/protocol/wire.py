"""The packet header shared by MRC and the RoCEv2 baseline (UDP payload, big-endian).

    0      1      2      4      6      8          12         16                 24     28     32
    | ver  | type | flags| ev   |length| qp       | psn      | offset / sack    | imm  | ts   | crc
    +------+------+------+------+------+----------+----------+------------------+------+------+---

- DATA: `psn`, `offset` (where the payload belongs in the receiver's buffer), `length` (payload
  bytes as sent, kept when a switch trims the payload away), `imm` (immediate value of a
  WRITE_WITH_IMM, with flag IMM), `prev` in `aux`: the PSN sent before this one on the same EV
  (paths are FIFO for full packets, so a missing `prev` is a loss the receiver can NACK at once).
- ACK: `psn` = cumulative (every PSN below it arrived), `offset` = SACK bitmap of the 64 PSNs
  from `aux` on (bit i: PSN aux+i arrived), `imm` = the PSN that triggered the ACK, `ev` and
  `ts` echoed from it, ECN flag if it arrived CE-marked.
- NACK: `psn` = the PSN to resend, flag TRIMMED (a switch cut it) or GAP (lost on its path),
  `ev` = the EV it went on.
- PROBE / PROBE_REPLY: `ev` = the EV being probed, `psn` = probe sequence, `ts` echoed.
`crc` is CRC-32 of the payload (zlib's): a byte changed in flight is dropped, never placed.
A trimmed packet is recognisable from its header alone: the switch sets TRIMMED and the
payload is shorter than `length`.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, NamedTuple

from hostagent.native import fastio

VERSION: Final = 1
# the header's fields: ver type flags ev length qp psn offset imm aux ts crc
HEADER: Final = struct.Struct("!BBHHHIIQIIII")
HEADER_SIZE: Final = HEADER.size  # 40 bytes
NO_PSN: Final = 0xFFFFFFFF

DATA: Final = 1
ACK: Final = 2
NACK: Final = 3
PROBE: Final = 4
PROBE_REPLY: Final = 5
TYPE_NAMES: Final = {DATA: "DATA", ACK: "ACK", NACK: "NACK",
                     PROBE: "PROBE", PROBE_REPLY: "PROBE_REPLY"}

# Control packets (ACK, NACK, probes) carry DSCP CS6 in the IPv6 traffic class; every fabric
# port serves that class first (testbed/kernel/shaping.py), as NDP and UET switches let headers and
# acknowledgements overtake data.
CONTROL_DSCP: Final = 48
CONTROL_TCLASS: Final = CONTROL_DSCP << 2

# flags
IMM: Final = 0x01  # DATA: last packet of a WRITE_WITH_IMM, `imm` is valid
TRIMMED: Final = 0x02  # DATA: payload cut by a switch; NACK: the reason
ECN: Final = 0x04  # ACK: the acknowledged packet arrived with CE
GAP: Final = 0x08  # NACK: lost on its path (a later packet on the same EV arrived)
RETX: Final = 0x10  # DATA: a retransmission
LAST: Final = 0x20  # DATA: last packet of its message


class Header(NamedTuple):
    """Immutable, like the frozen dataclass it replaced, and built in a third of the time: two
    are built per data packet (encode, decode), and that showed in the agents' profile."""

    type: int
    flags: int = 0
    ev: int = 0
    length: int = 0
    qp: int = 0
    psn: int = 0
    offset: int = 0
    imm: int = 0
    aux: int = 0
    ts: int = 0
    crc: int = 0
    version: int = VERSION

    @property
    def trimmed(self) -> bool:
        return bool(self.flags & TRIMMED)


class WireError(ValueError):
    """A datagram that is not one of ours (or of another version): dropped and counted."""


fastio.bind(Header, WireError)


def encode(h: Header, payload: bytes | memoryview = b"") -> bytes:
    crc = fastio.crc32(payload) if h.type == DATA else h.crc
    return HEADER.pack(h.version, h.type, h.flags, h.ev, h.length, h.qp, h.psn,
                       h.offset, h.imm, h.aux, h.ts, crc) + bytes(payload)


_pack: Final = HEADER.pack

# data_datagram(flags, ev, length, qp, psn, offset, imm, prev, ts, payload) -> bytes:
# `encode` of a DATA header and its payload without building a Header first, in C
# (hostagent/_fastio.c: the fields packed, the payload copied once, its CRC-32 taken from the
# copy). Every data packet the QPs send goes through it.
data_datagram: Final = fastio.data_datagram
# CRC-32 of a payload, zlib.crc32's value, folded with PCLMULQDQ where the CPU has it
# (hostagent/_crc32.c: a quarter of zlib's time for a 4096 B payload)
crc32: Final[Callable[[bytes | memoryview], int]] = fastio.crc32


def control_datagram(kind: int, flags: int, ev: int, qp: int, psn: int, offset: int = 0,
                     imm: int = 0, aux: int = 0, ts: int = 0) -> bytes:
    """`encode` of a header-only packet (ACK, NACK, probes) from its fields."""
    return _pack(VERSION, kind, flags, ev, 0, qp, psn, offset, imm, aux, ts, 0)


# decode(datagram) -> (Header, payload memoryview); a short payload with TRIMMED set is a
# trimmed packet. WireError for a datagram too short, of another version or of an unknown type
# (TYPE_NAMES). In C (every datagram received goes through it): unpacked straight into a Header.
decode: Final[Callable[[bytes | memoryview], tuple[Header, memoryview]]] = fastio.decode


def payload_ok(h: Header, payload: memoryview) -> bool:
    return len(payload) == h.length and crc32(payload) == h.crc


def trim(datagram: bytes) -> bytes:
    """What an MRC-aware switch does under congestion: keep the header, mark it, drop the rest.
    (The fabric does this in eBPF; this is the reference the tests compare against.)"""
    header = bytearray(datagram[:HEADER_SIZE])
    flags = int.from_bytes(header[2:4], "big") | TRIMMED
    header[2:4] = flags.to_bytes(2, "big")
    return bytes(header)
