"""An in-memory fabric: every rank's Endpoint in one asyncio loop, for testing collectives.

A real transport places packets wherever they land first and only the immediate orders them, so
the loopback can split each write into chunks, deliver them in a seeded random order and let
other writes interleave (`reorder`, `chunk`). A collective that reads a landing slot before its
imm, or reuses one too early, then fails its verification here instead of on a fabric. `flip`
corrupts one byte in transit, to prove that verification catches it.

The bytes are read from the sender's memory while they are delivered, not when the write is
posted, as a NIC's DMA does: a sender that changes its source before the write completes is
caught too. One fabric belongs to one event loop.
"""
from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, deque
from dataclasses import dataclass

from hostagent.protocol.endpoint import MessageStats

REORDER_CHUNK = 16  # bytes per piece when `reorder` is on and `chunk` is not given
IMM_LIMIT = 2**32  # an immediate is 32 bits on the wire


@dataclass(frozen=True)
class Flip:
    """Invert byte `byte` (modulo the write's size) of the `write`-th non-empty write (0-based)
    from `sender` to `receiver`, after it landed and before its imm fires."""

    sender: int
    receiver: int
    write: int = 0
    byte: int = 0


class _Inbox:
    """The immediates that fired at one rank, each consumed by one `wait_imm`."""

    def __init__(self) -> None:
        self._fired: Counter[tuple[int, int]] = Counter()
        self._waiters: dict[tuple[int, int], deque[asyncio.Future[None]]] = {}

    def fire(self, key: tuple[int, int]) -> None:
        waiters = self._waiters.get(key)
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():  # a cancelled wait (a timeout) does not consume the imm
                waiter.set_result(None)
                return
        self._fired[key] += 1

    async def wait(self, key: tuple[int, int]) -> None:
        if self._fired[key]:
            self._fired[key] -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, deque()).append(waiter)
        await waiter


class _Connection:
    """One sender -> receiver connection: an imm fires only when this write and every write
    posted before it on the connection have landed, whatever order their bytes arrived in."""

    def __init__(self, inbox: _Inbox, sender: int) -> None:
        self._inbox = inbox
        self._sender = sender
        self._posted = 0
        self._complete_below = 0  # every write with a lower sequence number has landed
        self._landed: set[int] = set()
        self._imms: dict[int, int] = {}
        self.nonempty_posted = 0

    def post(self, imm: int | None) -> int:
        seq = self._posted
        self._posted += 1
        if imm is not None:
            self._imms[seq] = imm
        return seq

    def land(self, seq: int, *, fire: bool = True) -> None:
        """`fire=False` for a write that failed: it must not signal, nor block later imms."""
        if not fire:
            self._imms.pop(seq, None)
        self._landed.add(seq)
        while self._complete_below in self._landed:
            self._landed.remove(self._complete_below)
            imm = self._imms.pop(self._complete_below, None)
            if imm is not None:
                self._inbox.fire((self._sender, imm))
            self._complete_below += 1


class LoopbackEndpoint:
    """One rank's view of a LoopbackFabric; satisfies hostagent.protocol.endpoint.Endpoint."""

    def __init__(self, fabric: LoopbackFabric, rank: int) -> None:
        self.rank = rank
        self.world = fabric.world
        self._fabric = fabric

    def register(self, buffer: memoryview) -> None:
        self._fabric._register(self.rank, buffer)

    async def write(self, peer: int, data: memoryview, remote_offset: int,
                    imm: int | None = None) -> MessageStats:
        start = time.time()
        fabric = self._fabric
        fabric._check_peer(self.rank, peer)
        if imm is not None and not 0 <= imm < IMM_LIMIT:
            raise ValueError(f"imm {imm} does not fit in 32 bits")
        source = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        size = source.nbytes
        connection = fabric._connection(self.rank, peer)
        flip_at = fabric._flip_offset(self.rank, peer, connection, size)
        seq = connection.post(imm)  # before any await: the order writes were posted in
        try:
            target = await fabric._registered(peer)
            if remote_offset < 0 or remote_offset + size > len(target):
                raise ValueError(
                    f"rank {self.rank} -> rank {peer}: a write of {size} B at offset "
                    f"{remote_offset} falls outside rank {peer}'s {len(target)}-byte buffer")
            for lo, hi in fabric._pieces(size):
                for _ in range(fabric._yields()):
                    await asyncio.sleep(0)
                target[remote_offset + lo:remote_offset + hi] = source[lo:hi]
            if flip_at is not None:
                target[remote_offset + flip_at] ^= 0xFF
        except BaseException:
            connection.land(seq, fire=False)
            raise
        connection.land(seq)
        return MessageStats(peer=peer, size=size, start=start, end=time.time())

    async def wait_imm(self, peer: int, imm: int) -> None:
        self._fabric._check_peer(self.rank, peer)
        await self._fabric._inboxes[self.rank].wait((peer, imm))


class LoopbackFabric:
    """N ranks connected all-to-all in memory. `seed` drives the delivery order, `chunk` splits
    writes into pieces of that many bytes, `reorder` shuffles the pieces and interleaves writes,
    `flip` corrupts one byte in transit."""

    def __init__(self, world: int, *, seed: int | None = None, chunk: int | None = None,
                 reorder: bool = False, flip: Flip | None = None) -> None:
        if world < 1:
            raise ValueError(f"world must be at least 1, not {world}")
        if chunk is not None and chunk < 1:
            raise ValueError(f"chunk must be at least 1 byte, not {chunk}")
        self.world = world
        self._rng = random.Random(seed)
        self._chunk = chunk or (REORDER_CHUNK if reorder else None)
        self._reorder = reorder
        self._flip = flip
        self._endpoints = [LoopbackEndpoint(self, rank) for rank in range(world)]
        self._buffers: list[memoryview | None] = [None] * world
        self._ready = [asyncio.Event() for _ in range(world)]
        self._inboxes = [_Inbox() for _ in range(world)]
        self._connections: dict[tuple[int, int], _Connection] = {}

    def endpoint(self, rank: int) -> LoopbackEndpoint:
        return self._endpoints[rank]

    def _register(self, rank: int, buffer: memoryview) -> None:
        if self._buffers[rank] is not None:
            raise RuntimeError(f"rank {rank} registered its buffer twice")
        if buffer.readonly:
            raise ValueError(f"rank {rank}: the registered buffer must be writable")
        self._buffers[rank] = buffer.cast("B") if buffer.format != "B" else buffer
        self._ready[rank].set()

    async def _registered(self, rank: int) -> memoryview:
        """A write waits for the peer's registration, as a connection waits for its memory key."""
        await self._ready[rank].wait()
        buffer = self._buffers[rank]
        assert buffer is not None
        return buffer

    def _check_peer(self, rank: int, peer: int) -> None:
        if not 0 <= peer < self.world or peer == rank:
            raise ValueError(f"rank {rank}: {peer} is not a peer in a world of {self.world}")

    def _connection(self, sender: int, receiver: int) -> _Connection:
        key = (sender, receiver)
        if key not in self._connections:
            self._connections[key] = _Connection(self._inboxes[receiver], sender)
        return self._connections[key]

    def _flip_offset(self, sender: int, receiver: int, connection: _Connection,
                     size: int) -> int | None:
        if size == 0:
            return None
        index = connection.nonempty_posted
        connection.nonempty_posted += 1
        flip = self._flip
        if flip is None or (flip.sender, flip.receiver, flip.write) != (sender, receiver, index):
            return None
        return flip.byte % size

    def _pieces(self, size: int) -> list[tuple[int, int]]:
        step = self._chunk or size
        if step == 0:
            return [(0, 0)]
        pieces = [(lo, min(lo + step, size)) for lo in range(0, size, step)]
        if self._reorder:
            self._rng.shuffle(pieces)
        return pieces

    def _yields(self) -> int:
        """How many turns of the loop pass before the next piece lands: at least one, so every
        write is asynchronous; with `reorder`, a random few, so later writes overtake earlier."""
        return self._rng.randint(1, 3) if self._reorder else 1
