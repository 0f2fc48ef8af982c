"""Types of the C extension hostagent/_fastio.c (built by `make ext`)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

CONTROL_SPACE: int
HEADER_SIZE: int
CRC32_FOLDS: int

class Receiver:
    batch: int
    size: int
    calls: int
    datagrams: int
    truncated: int
    def __init__(self, batch: int = ..., size: int = ...) -> None: ...
    def dispatch(self, fd: int, receivers: Mapping[int, Callable[[bytes, float, bool], None]],
                 now: float, touched: set[int], /) -> int: ...

class Sender:
    batch: int
    dropped: int
    calls: int
    messages: int
    def __init__(self, batch: int = ..., arena: int = ...) -> None: ...
    def send_out(self, fd: int, out: list[tuple[int, bytes]], names: dict[int, bytes],
                 gso: bool, control: bytes, planes: dict[int, int] | None,
                 /) -> list[tuple[int, int, int]]: ...
    def flush(self) -> None: ...

def data_datagram(flags: int, ev: int, length: int, qp: int, psn: int, offset: int, imm: int,
                  prev: int, ts: int, payload: bytes | memoryview, /) -> bytes: ...
def crc32(data: bytes | bytearray | memoryview, value: int = ..., /) -> int: ...
def decode(datagram: bytes | memoryview, /) -> tuple[Any, memoryview]: ...
def bind(header: type, error: type[Exception], /) -> None: ...
