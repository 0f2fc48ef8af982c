"""A deterministic network for the sans-IO transports: two QPs and the paths between them.

Each (sender, EV) pair is one path with its own latency, jitter, loss, trim, duplication and ECN
probabilities, or dead. Full packets stay in order on a path (a path is a chain of FIFO
queues); trimmed headers take the path's bare latency, overtaking queued data as a switch's
priority queue makes them do. Paths may share a `Link`: a FIFO port with a rate, which marks
and trims data by its backlog as the fabric's ports do (a NIC port, or a congested switch port
that several paths cross). A path may also cross another flow's queue (`CrossQueue`: a switch
port held by traffic that is not ours, such as a TCP incast's bursts on one spine). Everything
random comes from one seeded generator, so a failing case replays exactly. With `hold`, each
side's receive path holds every datagram that long before its QP sees it, through the agents'
delay line (hostagent/runtime/delay_line.py): the link latency an agent adds at its end.
"""
from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from hostagent.protocol import wire
from hostagent.runtime.delay_line import DelayLine


@dataclass
class Link:
    """A port at `rate` bytes/s shared by the paths that name it: data queues behind data
    (FIFO); above `ecn_bytes` of backlog it is CE-marked, above `trim_bytes` trimmed (its
    header then takes the path's bare latency). Control packets pass ahead, as at a fabric
    port that serves CS6 first."""
    rate: float
    ecn_bytes: float = float("inf")
    trim_bytes: float = float("inf")
    busy_until: float = 0.0
    carried: int = 0  # data packets it sent whole

    def enqueue(self, now: float, size: int) -> tuple[float, bool] | None:
        """When a data packet of `size` bytes arriving now leaves, and whether it is marked;
        None: trimmed."""
        backlog = max(0.0, self.busy_until - now) * self.rate
        if backlog > self.trim_bytes:
            return None
        self.busy_until = max(now, self.busy_until) + size / self.rate
        self.carried += 1
        return self.busy_until, backlog > self.ecn_bytes


@dataclass
class CrossQueue:
    """A switch port at `rate` bytes/s on a path, where `backlog(t)` bytes of another flow
    are queued at time t: our data waits behind them, is CE-marked above `ecn_bytes` and
    trimmed above `trim_bytes`, as at the fabric's ports. (The other flow's queue alone: ours
    is too small beside it to matter, as the victim's few packets beside the incast's.)"""
    rate: float
    backlog: Callable[[float], float]
    ecn_bytes: float = float("inf")
    trim_bytes: float = float("inf")

    def wait(self, now: float) -> tuple[float, bool] | None:
        """Seconds a data packet arriving now waits, and whether it is marked; None:
        trimmed."""
        queued = self.backlog(now)
        if queued > self.trim_bytes:
            return None
        return queued / self.rate, queued > self.ecn_bytes


@dataclass
class PathModel:
    latency: float = 50e-6
    jitter: float = 20e-6
    loss: float = 0.0
    trim: float = 0.0
    dup: float = 0.0
    ecn: float = 0.0
    dead: bool = False
    link: Link | None = None
    cross: CrossQueue | None = None  # after `link` (a spine port past the host's)


@dataclass
class SimNet:
    a: object  # QueuePair
    b: object
    seed: int = 0
    paths: dict[tuple[str, int], PathModel] = field(default_factory=dict)
    now: float = 0.0
    delivered: int = 0
    dropped: int = 0
    hold: float = 0.0  # s each side's delay line holds what arrives (0: none)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._queue: list[tuple[float, int, str, bytes, bool]] = []
        self._seq = 0
        self._fifo_tail: dict[tuple[str, int], float] = {}
        self.line = DelayLine()
        # what the network hands each side's arrivals to: its delay line, or (no hold) _deliver
        self._inlets = {to: self.line.inlet(self.hold, k, lambda data, now, ecn, to=to:
                                            self._deliver(to, data, ecn))
                        for k, to in enumerate("ab")}

    def path(self, side: str, ev: int) -> PathModel:
        return self.paths.setdefault((side, ev), PathModel())

    def lose(self, which: Callable[[str, wire.Header, int], bool]) -> list[int]:
        """Drop every datagram `which(side, header, times dropped so far)` picks, before
        its path sees it; returns the list the EV of each dropped one is appended to."""
        dropped: list[int] = []
        send = self._send

        def lossy(side: str, ev: int, data: bytes) -> None:
            h, _ = wire.decode(data)
            if which(side, h, len(dropped)):
                dropped.append(ev)
                return
            send(side, ev, data)
        self._send = lossy  # type: ignore[method-assign]
        return dropped

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
            marked = False
            if (model.link is not None and len(packet) > wire.HEADER_SIZE
                    and header.type == wire.DATA):
                queued = model.link.enqueue(self.now, len(packet))
                if queued is None:
                    packet = wire.trim(data)
                else:
                    at, marked = queued[0] + model.latency, queued[1]
            if (model.cross is not None and len(packet) > wire.HEADER_SIZE
                    and header.type == wire.DATA):
                waited = model.cross.wait(at - model.latency)
                if waited is None:
                    packet = wire.trim(data)
                else:
                    at, marked = at + waited[0], marked or waited[1]
            if len(packet) > wire.HEADER_SIZE or header.type != wire.DATA:
                at += rng.random() * model.jitter
                at = max(at, self._fifo_tail.get((side, ev), 0.0) + 1e-9)
                self._fifo_tail[(side, ev)] = at
            ecn = rng.random() < model.ecn or marked
            self._seq += 1
            heapq.heappush(self._queue, (at, self._seq, "b" if side == "a" else "a",
                                         packet, ecn))

    def _deliver(self, to: str, packet: bytes, ecn: bool) -> None:
        """A packet arrives at side `to`'s QP. (Tests that watch or withhold arrivals replace
        this on the SimNet: the QPs may be compiled classes, whose methods cannot be.)"""
        (self.a if to == "a" else self.b).receive(packet, self.now, ecn)
        self.delivered += 1

    def _held(self) -> list[float]:
        """When each latency class of the delay line next releases (none when empty)."""
        return [d for d in map(self.line.due, range(len(self.line.fifos))) if d is not None]

    def _arrive(self) -> None:
        """What the network carried by now into the receive paths, then what they release."""
        while self._queue and self._queue[0][0] <= self.now:
            _, _, to, packet, ecn = heapq.heappop(self._queue)
            self._inlets[to](packet, self.now, ecn)
        for k in range(len(self.line.fifos)):
            self.line.release(k, self.now, set())

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
            times = deadlines + ([self._queue[0][0]] if self._queue else []) + self._held()
            if not times:
                break
            self.now = max(self.now, min(times))
            if self.now > until:
                break
            self._arrive()
            for qp in (self.a, self.b):
                deadline = qp.next_deadline()
                if deadline is not None and deadline <= self.now:
                    qp.on_timer(self.now)
            self._pump()
        return self.now

    # ---- stepping, for several pairs sharing one clock (SimFabric) ----
    def next_time(self) -> float | None:
        times = [d for d in (self.a.next_deadline(), self.b.next_deadline()) if d is not None]
        if self._queue:
            times.append(self._queue[0][0])
        times += self._held()
        return min(times) if times else None

    def step(self, now: float) -> None:
        """Everything due by `now`: deliveries, timers, then what the QPs send."""
        self.now = now
        self._arrive()
        for qp in (self.a, self.b):
            deadline = qp.next_deadline()
            if deadline is not None and deadline <= now:
                qp.on_timer(now)
        self._pump()


DEADLOCK_TURNS = 20  # loop turns with nothing in flight before a run counts as deadlocked


class SimFabric:
    """Every ordered pair of `world` ranks joined by a QP pair on its own SimNet, one clock for
    all, and an `Endpoint` per rank: collectives run over the real sans-IO transports here.
    `make_pair(i, j)` returns the two QPs (rank i's toward j, rank j's toward i)."""

    def __init__(self, world: int, make_pair, seed: int = 0, path=None) -> None:
        self.world = world
        self.now = 0.0
        self.qps: dict[int, dict[int, object]] = {r: {} for r in range(world)}
        self.nets: list[SimNet] = []
        for i in range(world):
            for j in range(i + 1, world):
                a, b = make_pair(i, j)
                self.qps[i][j], self.qps[j][i] = a, b
                net = SimNet(a, b, seed=seed * 1000 + i * world + j)
                if path is not None:
                    path(net)
                self.nets.append(net)
        self.writes: dict[tuple[int, int], asyncio.Future] = {}
        self.imms: dict[tuple[int, int, int], int] = {}
        self.imm_waiters: dict[tuple[int, int, int], asyncio.Future] = {}
        self.failure: str | None = None

    def endpoint(self, rank: int) -> SimEndpoint:
        return SimEndpoint(self, rank)

    def _dispatch(self) -> bool:
        """Deliver the QPs' events to the endpoints' futures; whether there were any."""
        from hostagent.protocol.qp import ImmArrived, QPFailed, WriteDone
        busy = False
        for rank, peers in self.qps.items():
            for peer, qp in peers.items():
                while qp.events:
                    busy = True
                    event = qp.events.popleft()
                    if isinstance(event, WriteDone):
                        self.writes.pop((id(qp), event.msg_id)).set_result(event.stats)
                    elif isinstance(event, ImmArrived):
                        key = (rank, peer, event.imm)
                        waiter = self.imm_waiters.pop(key, None)
                        if waiter is not None:
                            waiter.set_result(None)
                        else:
                            self.imms[key] = self.imms.get(key, 0) + 1
                    elif isinstance(event, QPFailed):
                        self.failure = event.reason
                        for f in list(self.writes.values()) + list(self.imm_waiters.values()):
                            if not f.done():
                                f.set_exception(RuntimeError(event.reason))
        return busy

    async def run(self, coros, until: float = 60.0) -> list:
        """Run the ranks' coroutines to completion on simulated time (at most `until` s)."""
        task = asyncio.ensure_future(asyncio.gather(*coros))
        while not task.done():
            for _ in range(3):  # let the collectives post what they can at this instant
                await asyncio.sleep(0)
            for net in self.nets:
                net.step(self.now)
            if self._dispatch():
                continue
            times = [t for t in (net.next_time() for net in self.nets) if t is not None]
            if not times:
                for _ in range(DEADLOCK_TURNS):  # ranks' tasks wake one another in turn
                    await asyncio.sleep(0)
                if (not task.done() and not any(n.next_time() for n in self.nets)
                        and not self._dispatch()):
                    raise RuntimeError("deadlock: nothing in flight, ranks still waiting")
                continue
            self.now = max(self.now, min(times))
            if self.now > until:
                task.cancel()
                raise TimeoutError(f"not done after {until} simulated s")
        return task.result()


class SimEndpoint:
    """One rank's `Endpoint` (hostagent/protocol/endpoint.py) over its QPs in a SimFabric."""

    def __init__(self, fabric: SimFabric, rank: int) -> None:
        self.fabric, self.rank, self.world = fabric, rank, fabric.world
        self._next = 0

    def register(self, buffer: memoryview) -> None:
        for qp in self.fabric.qps[self.rank].values():
            qp.buffer = buffer

    async def write(self, peer: int, data: memoryview, remote_offset: int,
                    imm: int | None = None):
        qp = self.fabric.qps[self.rank][peer]
        self._next += 1
        future = asyncio.get_running_loop().create_future()
        self.fabric.writes[(id(qp), self._next)] = future
        qp.post_write(self._next, data, remote_offset, imm, self.fabric.now, peer)
        return await future

    async def wait_imm(self, peer: int, imm: int) -> None:
        key = (self.rank, peer, imm)
        if self.fabric.imms.get(key):
            self.fabric.imms[key] -= 1
            return
        future = asyncio.get_running_loop().create_future()
        self.fabric.imm_waiters[key] = future
        await future
