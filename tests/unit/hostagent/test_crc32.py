"""The payload CRC in C (hostagent/_crc32.c) against zlib's, which defines it: folding by
carry-less multiplication must give zlib.crc32's value for every length, alignment and start."""
from __future__ import annotations

import platform
import zlib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostagent.native import fastio
from hostagent.protocol import wire


@given(st.integers(0, 9000), st.randoms(use_true_random=False), st.integers(0, 15),
       st.integers(0, 2**32 - 1))
def test_the_value_is_zlibs_at_any_length_offset_and_start(length, rnd, offset, start):
    data = rnd.randbytes(length)  # lengths drawn evenly: most fold, as payloads do
    view = memoryview(bytes(offset) + data)[offset:]  # the payload behind a header: unaligned
    assert fastio.crc32(view) == zlib.crc32(data)
    assert fastio.crc32(view, start) == zlib.crc32(data, start)


def test_every_length_around_the_folding_blocks():
    data = bytes(range(256)) * 20
    for n in [*range(200), 4095, 4096, 4097, 4136, len(data)]:
        assert fastio.crc32(data[:n]) == zlib.crc32(data[:n]), n


def test_one_changed_bit_changes_it():
    payload = bytearray(4096)
    before = wire.crc32(payload)
    payload[2048] ^= 0x10
    assert wire.crc32(payload) != before == zlib.crc32(bytes(4096))


def test_it_folds_where_the_cpu_can():
    flags = next((line.split(":", 1)[1].split() for line in
                  Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")),
                 [])
    can = platform.machine() == "x86_64" and "pclmulqdq" in flags and "sse4_1" in flags
    assert int(can) == fastio.CRC32_FOLDS
