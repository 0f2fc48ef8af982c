"""A deterministic network for the sans-IO transports: two QPs and the paths between them.

Each (sender, EV) pair is one path with its own latency, jitter, loss, trim, duplication and ECN
probabilities, or dead. Full packets stay in order on a path (a path is a chain of FIFO
queues); trimmed headers take the path's bare latency, overtaking queued data as a switch's
priority queue makes them do. Everything
random comes from one seeded generator, so a failing case replays exactly.
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from hostagent import wire


@dataclass
class PathModel:
    latency: float = 50e-6
    jitter: float = 20e-6
    loss: float = 0.0
    trim: float = 0.0
    dup: float = 0.0
    ecn: float = 0.0
    dead: bool = False


@dataclass
class SimNet:
    a: object  # QueuePair
    b: object
    seed: int = 0
    paths: dict[tuple[str, int], PathModel] = field(default_factory=dict)
    now: float = 0.0
    delivered: int = 0
    dropped: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._queue: list[tuple[float, int, str, bytes, bool]] = []
        self._seq = 0
        self._fifo_tail: dict[tuple[str, int], float] = {}

    def path(self, side: str, ev: int) -> PathModel:
        return self.paths.setdefault((side, ev), PathModel())

    def _send(self, side: str, ev: int, data: bytes) -> None:
        model = self.path(side, ev)
        rng = self.rng
        if model.dead or rng.random() < model.loss:
            self.dropped += 1
            return
        header, _ = wire.decode(data)
        copies = 2 if rng.random() < model.dup else 1
        for _ in range(copies):
            packet = data
            if header.type == wire.DATA and rng.random() < model.trim:
                packet = wire.trim(data)
            at = self.now + model.latency
            if len(packet) > wire.HEADER_SIZE or header.type != wire.DATA:
                at += rng.random() * model.jitter
                at = max(at, self._fifo_tail.get((side, ev), 0.0) + 1e-9)
                self._fifo_tail[(side, ev)] = at
            ecn = rng.random() < model.ecn
            self._seq += 1
            heapq.heappush(self._queue, (at, self._seq, "b" if side == "a" else "a",
                                         packet, ecn))

    def _pump(self) -> None:
        for side, qp in (("a", self.a), ("b", self.b)):
            for ev, data in qp.poll_transmit(self.now):
                self._send(side, ev, data)

    def run(self, done, until: float = 30.0) -> float:
        """Advance until `done()` is true, nothing is left to do, or `until` (simulated s)."""
        self._pump()
        while not done():
            deadlines = [d for d in (self.a.next_deadline(), self.b.next_deadline())
                         if d is not None]
            times = deadlines + ([self._queue[0][0]] if self._queue else [])
            if not times:
                break
            self.now = max(self.now, min(times))
            if self.now > until:
                break
            while self._queue and self._queue[0][0] <= self.now:
                _, _, to, packet, ecn = heapq.heappop(self._queue)
                (self.a if to == "a" else self.b).receive(packet, self.now, ecn)
                self.delivered += 1
            for qp in (self.a, self.b):
                deadline = qp.next_deadline()
                if deadline is not None and deadline <= self.now:
                    qp.on_timer(self.now)
            self._pump()
        return self.now
