"""What a collective sees of the network: one rank's RDMA-WRITE endpoint toward its peers.

Collectives are written against this interface only, so the same algorithm runs over MRC, over
the RoCEv2 baseline, or over the in-memory loopback used by the unit tests. The semantics are
MRC's (and RoCE's) RDMA WRITE / WRITE_WITH_IMM:

- every rank registers one receive buffer (a writable byte region) before traffic starts; peers
  write into it at byte offsets they choose;
- `write(peer, data, remote_offset, imm)` completes when the peer acknowledged every byte
  (the bytes are in the peer's buffer at `remote_offset`);
- a write with `imm` is a WRITE_WITH_IMM: the peer's `wait_imm(sender, imm)` completes only once
  that write's bytes, and every byte this sender wrote to it before on the same connection,
  have landed. Writes without `imm` complete silently on the receiving side.
"""
from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol


class MessageStats:
    """What the transport reports for one completed write (for `messages.parquet`); a plain
    class, as qp.py's per-write ones, so that a compiled build compiles its constructor."""

    __slots__ = ("peer", "size", "start", "end", "retransmits", "trims", "evs_used")

    def __init__(self, peer: int, size: int, start: float, end: float, retransmits: int = 0,
                 trims: int = 0, evs_used: list[int] | None = None) -> None:
        self.peer = peer
        self.size = size  # payload bytes
        self.start = start  # seconds, wall clock (time.time()), when the write was posted
        self.end = end  # when its last byte was acknowledged
        self.retransmits = retransmits  # packets sent again
        self.trims = trims  # packets of this message trimmed in the fabric (NACKed as trimmed)
        # EV indexes its packets went on (MRC)
        self.evs_used: list[int] = [] if evs_used is None else evs_used


class Endpoint(Protocol):
    rank: int
    world: int  # number of ranks

    def register(self, buffer: memoryview) -> None:
        """The region peers write into (must be called once, before any traffic)."""

    def write(self, peer: int, data: memoryview, remote_offset: int,
              imm: int | None = None) -> Awaitable[MessageStats]:
        """RDMA WRITE (with immediate if imm is not None) of `data` into peer's buffer; await
        what it returns for its completion (a coroutine, or the IO driver's future, which has
        posted the write already)."""

    async def wait_imm(self, peer: int, imm: int) -> None:
        """Until a WRITE_WITH_IMM carrying `imm` from `peer` has fully landed here."""
