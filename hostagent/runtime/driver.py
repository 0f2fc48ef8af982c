"""The IO side of the transports: UDP sockets, the event loop, and the `Endpoint` collectives use.

One asyncio loop per agent, no busy spinning: sockets wake it (`add_reader`); the QPs' next
deadlines wait in one heap per process (every host a pooled process serves), behind one loop
timer for the earliest. Nothing polls: an idle QP has no deadline, an idle process sleeps.
Every QP is sans-IO; this module only moves bytes and time in and out:
- MRC: one socket sends every packet to the uSID address of the EV the QP chose; the fabric
  steers it, nothing else picks the path;
- RoCEv2: each QP has its own socket bound to its UDP source port (its ECMP entropy) on the
  plain address of its plane, and sends to the peer's plain address: the fabric's hash picks
  the path and keeps it;
- all data and control arrive on one socket bound to UDP port 4791 (RoCEv2's), demultiplexed
  by the QP number in the header. Data packets are ECN-capable (ECT(0)); a CE mark on
  arrival is read from the traffic class and handed to the QP. Control packets (ACK, NACK,
  probes) carry DSCP CS6, which every fabric port serves first.
With `gso`, consecutive data packets a QP sends to the same destination (RoCEv2's whole window;
MRC only when its spraying picks the same EV twice in a row) leave in one message with
UDP_SEGMENT: the kernel splits them into the same datagrams before they reach the fabric
(ports have gso_max_segs 1), so only the system call count changes.
Datagrams move in batches (hostagent/runtime/batchio.py, in C): recvmmsg reads up to 64 per call and
hands each to its QP, and what the QPs kicked by one event (a batch received, a timer, NIC
room) have to send leaves in one sendmmsg per socket at the end of that event.
`HOSTAGENT_BATCH=0` in the environment makes every batch one datagram: one system call per
datagram each way (for comparison; bench/agent.py measures both). A wake-up reads
`HOSTAGENT_READ_BATCHES` x 64 datagrams at most (default 1) before it lets timers and the other
hosts of a pooled process run: 1 and 4 measured alike at 16 and 32 hosts (bench/scale.py).
Datagrams from a peer with a link latency are held that long on arrival (delay_line.py), one
wake per latency class in the timer heap, then handed to their QPs as if they had just arrived.
A write to a peer with several QPs (the RoCEv2 "1, 8 or 16 QPs" comparison) is split into one
part per QP, each carrying the immediate: the receiver completes `wait_imm` when every part has
arrived, so WRITE_WITH_IMM keeps its meaning across QPs.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import socket
import time
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from typing import Final

from mypy_extensions import mypyc_attr

from hostagent.protocol import wire
from hostagent.protocol.endpoint import MessageStats
from hostagent.protocol.nic import Nic
from hostagent.protocol.qp import PACKET_OVERHEAD, ImmArrived, QPFailed, QueuePair, WriteDone
from hostagent.runtime import batchio
from hostagent.runtime.delay_line import DelayLine
from hostagent.runtime.per_loop import PerLoop

PORT: Final = 4791
QPS_PER_PEER_MAX: Final = 64  # QPN stride per peer: covers the scenario's limit (test_qpn.py)
ECT0: Final = 0x02
# control packets' traffic class: they overtake data at every port
_CONTROL_CMSG: Final = batchio.tclass_cmsg(wire.CONTROL_TCLASS)
# datagrams per sendmmsg / recvmmsg call
BATCH: Final = batchio.BATCH if os.environ.get("HOSTAGENT_BATCH", "1") != "0" else 1
# batches of batchio.BATCH datagrams read per wake-up
READ_BATCHES: Final = int(os.environ.get("HOSTAGENT_READ_BATCHES", "1"))
_READS: Final = max(1, READ_BATCHES * batchio.BATCH // BATCH)  # recvmmsg calls per wake-up at most
_io: tuple[batchio.Receiver, batchio.Sender] | None = None
# a Driver's wake for NIC room, in the timer heap beside its QPs' (QPNs are >= 0)
NIC_ROOM: Final = -1
# and the wake of its delay line's latency class k: HELD - k
HELD: Final = -2
# s: a held datagram due this soon is released by whatever wakes the loop now. The loop sleeps
# with epoll's 1 ms resolution, so a release timer fires up to 1 ms late; armed this much before
# the due time, and taking what is due this much ahead, releases land within half of it either
# side, and mostly in wake-ups the loop makes anyway (reads, the QPs' timers) instead of
# instants of their own, which doubled the loop's wake-ups per packet.
RELEASE_EARLY: Final = 0.0005


def io_stats() -> dict[str, int]:
    """This process's batched IO so far: calls and what they carried (how well batching
    batched), datagrams dropped for being longer than the receive buffers, and sends the kernel
    refused (a full socket or qdisc, an unreachable path)."""
    if _io is None:
        return {}
    rx, tx = _io
    return {"recvmmsg_calls": rx.calls, "received": rx.datagrams,
            "received_truncated": rx.truncated, "sendmmsg_calls": tx.calls,
            "sent_messages": tx.messages, "send_refused": tx.dropped}


def _batch_io() -> tuple[batchio.Receiver, batchio.Sender]:
    """One receive area and one send staging area per process: the event loop uses one socket
    at a time, and every Driver flushes its sends before it returns to the loop."""
    global _io
    if _io is None:
        _io = (batchio.Receiver(BATCH), batchio.Sender(BATCH))
    return _io


@mypyc_attr(native_class=False)  # compiled, an exception class stays a Python class
class TransportFailed(RuntimeError):
    """A QP exhausted its retry budget: the collective cannot complete."""


class Route:
    """How one QP reaches its peer: where each of its EVs (or its single path) sends to.

    `plane_set` is asked at every kick, so it is computed here, once: compiled by mypyc, a
    `functools.cached_property` is an ordinary property, computed (a set, a sort) at each
    access."""

    __slots__ = ("sock", "destinations", "planes", "plane_set")

    def __init__(self, sock: socket.socket, destinations: dict[int, tuple[str, int]],
                 planes: dict[int, int]) -> None:
        self.sock = sock
        self.destinations = destinations  # EV index (0 for RoCEv2) -> (address, port)
        self.planes = planes  # EV index -> the plane (NIC port) it leaves through
        self.plane_set: tuple[int, ...] = tuple(sorted(set(planes.values())))


class _Pending:
    """A write split over the peer's QPs: its parts' stats until every part is done."""

    __slots__ = ("parts", "stats", "future")

    def __init__(self, parts: int, future: asyncio.Future[MessageStats]) -> None:
        self.parts = parts
        self.stats: list[MessageStats] = []
        self.future = future


def qpn(local_rank: int, peer_rank: int, k: int) -> tuple[int, int]:
    """(our QP number, the peer's) for the k-th QP between two ranks."""
    return peer_rank * QPS_PER_PEER_MAX + k, local_rank * QPS_PER_PEER_MAX + k


# A NIC does not drop what its host posts, nor what it received and must deliver: the fabric's
# ports are where packets may be lost, not the agents' sockets. Socket buffers are therefore
# far above what windows can fill (the *FORCE options pass net.core.[rw]mem_max: agents are
# root in their namespace); the NIC pacing (nic.py) keeps what waits in a host port short.
_SO_SNDBUFFORCE, _SO_RCVBUFFORCE = 32, 33
SOCKET_BUFFER: Final = 64 << 20


def _big_buffer(sock: socket.socket, force: int, plain: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, force, SOCKET_BUFFER)
    except PermissionError:  # not root (unit tests on loopback): as large as allowed
        sock.setsockopt(socket.SOL_SOCKET, plain, SOCKET_BUFFER)


def ecn_socket(sock: socket.socket) -> socket.socket:
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, ECT0)
    _big_buffer(sock, _SO_SNDBUFFORCE, socket.SO_SNDBUF)
    sock.setblocking(False)
    return sock


def listen_socket(address: tuple[str, int] = ("::", PORT)) -> socket.socket:
    """The socket a host receives on (its ECN marks read too); `address` other than the
    agent's own for benches and tests on loopback (`("::1", 0)`: a port of the kernel's)."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    _big_buffer(sock, _SO_RCVBUFFORCE, socket.SO_RCVBUF)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    sock.bind(address)
    sock.setblocking(False)
    return sock


class _Timers:
    """The QPs' deadlines of every Driver on one event loop, each Driver's wake for NIC room
    (`NIC_ROOM`) and for its delay line's latency classes (`HELD` - k): one heap of (deadline,
    driver, qpn) behind one loop timer for the earliest. Each Driver's `_armed` says which of its
    entries is current (a QP whose deadline moved leaves its old entry behind, skipped when popped).
    Re-arming is a tuple push, not a TimerHandle made and cancelled; whatever is due together, of
    any host, runs in one wake-up and its sends leave in one flush."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.heap: list[tuple[float, int, int]] = []
        self.drivers: dict[int, Driver] = {}
        self._ids = itertools.count()
        self._wake: asyncio.TimerHandle | None = None
        self._wake_at = float("inf")

    def add(self, drv: Driver) -> int:
        key = next(self._ids)
        self.drivers[key] = drv
        return key

    def remove(self, key: int) -> None:
        """A closed Driver: its entries are skipped, and the timer stops with the last one."""
        del self.drivers[key]
        if not self.drivers and self._wake is not None:
            self._wake.cancel()
            self._wake, self._wake_at = None, float("inf")
            self.heap.clear()

    def push(self, deadline: float, key: int, qpn: int) -> None:
        heapq.heappush(self.heap, (deadline, key, qpn))
        if deadline < self._wake_at:
            self._schedule(deadline)

    def _schedule(self, at: float) -> None:
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = at
        self._wake = self.loop.call_at(at, self._fire)

    def _current(self, entry: tuple[float, int, int]) -> Driver | None:
        deadline, key, qpn = entry
        drv = self.drivers.get(key)
        return drv if drv is not None and drv._armed.get(qpn) == deadline else None

    def _fire(self) -> None:
        """Every QP whose deadline has come: its timers, then what it has to send."""
        self._wake, self._wake_at = None, float("inf")
        heap = self.heap
        now = self.loop.time()
        due: list[tuple[Driver, int]] = []
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            drv = self._current(entry)
            if drv is not None:  # else superseded by a later re-arm, or its Driver closed
                del drv._armed[entry[2]]
                due.append((drv, entry[2]))
        for drv, qpn in due:
            try:
                if qpn == NIC_ROOM:
                    drv._on_nic_room()
                elif qpn <= HELD:
                    drv._release(HELD - qpn, now)
                else:
                    qp = drv._by_qpn[qpn][1]
                    qp.on_timer(now)
                    drv._kick(qp)
            except Exception as exc:  # noqa: BLE001 (logged as the loop logs a callback's:
                # a QP that raised stops no other host's timers)
                what = ("its NIC wake" if qpn == NIC_ROOM else "its delay line" if qpn <= HELD
                        else f"QP {qpn}: its timer")
                self.loop.call_exception_handler({
                    "message": f"rank {drv.rank}, {what} raised", "exception": exc})
        while heap and self._current(heap[0]) is None:
            heapq.heappop(heap)  # stale entries on top: drop them before choosing the wake
        if heap and heap[0][0] < self._wake_at:  # a kick above may have armed a later wake
            self._schedule(heap[0][0])
        _batch_io()[1].flush()


TIMERS: Final = PerLoop(lambda: _Timers(asyncio.get_running_loop()))  # the process's


class Driver:
    """The `Endpoint` of one rank over real sockets."""

    def __init__(self, rank: int, world: int, listen: socket.socket,
                 qps: Mapping[int, Sequence[tuple[QueuePair, Route]]], gso: bool = False,
                 nic: Nic | None = None, latency: Mapping[int, float] | None = None) -> None:
        """`latency`: peer rank -> the one-way seconds its datagrams are held for on arrival
        (delay_line.py); a peer not named, or at 0, is not held."""
        self.rank, self.world = rank, world
        self.gso = gso  # consecutive data packets to one destination in one system call
        self.nic = nic  # QPs send only what the ports can take (None: as fast as the kernel)
        self._nic_waiting: deque[QueuePair] = deque()  # blocked on the NIC, served in turn
        self.loop = asyncio.get_running_loop()
        self._listen = listen
        self._peers = qps  # peer rank -> its QPs and routes
        self._by_qpn: dict[int, tuple[int, QueuePair, Route]] = {}
        for peer, entries in qps.items():
            for qp, route in entries:
                self._by_qpn[qp.qpn] = (peer, qp, route)
        # One loop timer per process, not one per QP nor per host (_Timers)
        self._armed: dict[int, float] = {}  # qpn (or NIC_ROOM) -> its current deadline
        self._timers = TIMERS.get()
        self._timer_key: int | None = self._timers.add(self)
        self._writes: dict[tuple[int, int], _Pending] = {}  # (qpn, msg_id) -> pending
        self._next_write = 0
        self._imms: dict[tuple[int, int], int] = defaultdict(int)  # (peer, imm) -> parts seen
        self._imm_waiters: dict[tuple[int, int], asyncio.Future[None]] = {}
        self.failure: str | None = None
        self.wall_offset = time.time() - self.loop.time()  # QPs run on the loop's monotonic clock
        self._rx, self._tx = _batch_io()
        self._names = {qp.qpn: {ev: batchio.sockaddr(*dest)
                                for ev, dest in route.destinations.items()}
                       for _, qp, route in self._by_qpn.values()}
        self._line = DelayLine()
        held = latency or {}
        self._receivers = {qpn: self._line.inlet(held.get(peer, 0.0), qpn, qp.receive)
                           for qpn, (peer, qp, _) in self._by_qpn.items()}
        # QPs whose datagrams are held: a receive that only held them has nothing to kick
        self._held = {qpn for qpn, (peer, _, _) in self._by_qpn.items() if held.get(peer, 0.0)}
        self.loop.add_reader(listen.fileno(), self._on_readable)

    def close(self) -> None:
        self._flush()
        self.loop.remove_reader(self._listen.fileno())
        if self._timer_key is not None:
            self._timers.remove(self._timer_key)
            self._timer_key = None
        self._armed.clear()

    def register(self, buffer: memoryview) -> None:
        for _, qp, _ in self._by_qpn.values():
            qp.buffer = buffer

    # ---- Endpoint ----
    def write(self, peer: int, data: memoryview, remote_offset: int,
              imm: int | None = None) -> asyncio.Future[MessageStats]:
        """Post the write now; its completion is a plain future. A ring posts a write at every
        step and goes on to wait for its left neighbour's: a coroutine here would make that a
        task each (its creation, name and registration cost more than posting the write)."""
        self._raise_if_failed()
        entries = self._peers[peer]
        n = len(entries)
        write_id = self._next_write
        self._next_write += 1
        future: asyncio.Future[MessageStats] = self.loop.create_future()
        pending = _Pending(n, future)
        size = len(data)
        bounds = [size * k // n for k in range(n + 1)]
        now = self.loop.time()
        for k, (qp, _) in enumerate(entries):
            part = data[bounds[k]:bounds[k + 1]]
            self._writes[(qp.qpn, write_id)] = pending
            qp.post_write(write_id, part, remote_offset + bounds[k], imm, now, peer)
            self._kick(qp)
        self._flush()
        return future

    async def wait_imm(self, peer: int, imm: int) -> None:
        key = (peer, imm)
        need = len(self._peers[peer])
        if self._imms[key] < need:
            self._raise_if_failed()
            future = self._imm_waiters.setdefault(key, self.loop.create_future())
            await future
        self._imms[key] -= need
        if self._imms[key] == 0:
            del self._imms[key]

    # ---- the loop ----
    def _raise_if_failed(self) -> None:
        if self.failure:
            raise TransportFailed(self.failure)

    def _on_readable(self) -> None:
        """Datagrams to their QPs (hostagent/_fastio.c: each is handed to its QP's `receive`,
        CE read from its traffic class), then each QP that got some is kicked once."""
        touched: set[int] = set()
        fd, rx, receivers = self._listen.fileno(), self._rx, self._receivers
        try:
            for _ in range(_READS):  # then let timers and other hosts run
                if rx.dispatch(fd, receivers, self.loop.time(), touched) < rx.batch:
                    break
        finally:  # a receive that raised still leaves its batch's QPs to answer and send
            by_qpn, held = self._by_qpn, self._held
            for q in touched:
                if q not in held:
                    self._kick(by_qpn[q][1])
            now = self.loop.time()
            for k in range(len(self._line.fifos)):  # what is due now, then the class's wake
                due = self._line.due(k)
                if due is not None and due <= now + RELEASE_EARLY:
                    self._release(k, now)
                else:
                    self._arm_release(k, due)
            self._flush()

    def _release(self, k: int, now: float) -> None:
        """Latency class k's datagrams that are due, to their QPs, each QP kicked once; the
        class's next wake. Run by _Timers._fire, whose flush sends what the QPs answer."""
        touched: set[int] = set()
        try:
            self._line.release(k, now, touched, RELEASE_EARLY)
        finally:
            by_qpn = self._by_qpn
            for q in touched:
                self._kick(by_qpn[q][1])
            self._arm_release(k, self._line.due(k))

    def _arm_release(self, k: int, due: float | None) -> None:
        """Latency class k's wake, RELEASE_EARLY before its head is due (None: it holds none)."""
        self._arm(HELD - k, None if due is None else due - RELEASE_EARLY)

    def _flush(self) -> None:
        self._tx.flush()

    def _arm(self, qpn: int, deadline: float | None) -> None:
        """The QP's next deadline, or the NIC wake's (None: nothing to time)."""
        if deadline is None:
            self._armed.pop(qpn, None)
            return
        if self._armed.get(qpn) == deadline or self._timer_key is None:
            return
        self._armed[qpn] = deadline
        self._timers.push(deadline, self._timer_key, qpn)

    def _kick(self, qp: QueuePair, turn: bool = False) -> None:
        """Send what the QP has to send, deliver its events, re-arm its timer. With a NIC, the
        QP's data goes out one turn at a time, a packet per port it sends on, as a NIC's round
        robin among its QPs: while QPs sharing its ports wait for room, it sends no data
        unless this is its turn (`turn`, given by `_on_nic_room`) and queues behind them. A
        QP woken by an ACK that took the room the waiting QPs were owed, or one turn that
        took all of it, sent its one destination a burst of the port's limit and starved the
        port's other QPs: on scenarios/htsim/a2a-8-real.yaml (56 MRC QPs on 8 hosts) the
        marks those bursts drew cut the windows unevenly, and MRC reached 61-64% of its
        ideal, against 68-72% with turns of one packet (bench.faults, one sitting)."""
        _, _, route = self._by_qpn[qp.qpn]
        now = self.loop.time()
        nic = self.nic
        budget: float | None = None
        if nic is not None:
            planes = route.plane_set
            if not turn and self._nic_waiting and self._queued_on(planes):
                budget = 0.0
            else:
                budget = nic.budget(planes, now)
                one = len(planes) * (qp.cfg.mss + PACKET_OVERHEAD)
                if budget > one:
                    budget = one
        out = qp.poll_transmit(now, budget)
        if out:
            sent = self._tx.send_out(route.sock.fileno(), out, self._names[qp.qpn], self.gso,
                                     _CONTROL_CMSG, None if nic is None else route.planes)
            if nic is not None:
                for plane, nbytes, count in sent:  # one call per port, the same clock
                    nic.sent(plane, nbytes, now, count)
        if qp.nic_blocked and qp not in self._nic_waiting:
            self._nic_waiting.append(qp)
            self._wake_on_nic_room()
        if qp.events:
            self._deliver(qp)
        self._arm(qp.qpn, None if qp.failed else qp.next_deadline())

    def _queued_on(self, planes: tuple[int, ...]) -> bool:
        """Whether a QP waiting for NIC room sends on one of `planes`."""
        by_qpn = self._by_qpn
        for waiting in self._nic_waiting:
            for p in by_qpn[waiting.qpn][2].plane_set:
                if p in planes:
                    return True
        return False

    def _wake_on_nic_room(self) -> None:
        """One wake, for when the first blocked QP's ports have room again (`Nic.wake`: a
        packet, or several where the ports' limit holds many packet times)."""
        if NIC_ROOM not in self._armed and self.nic is not None and self._nic_waiting:
            now = self.loop.time()
            delay = min(self.nic.wake(self._by_qpn[qp.qpn][2].plane_set,
                                      qp.cfg.mss + wire.HEADER_SIZE, now)
                        for qp in self._nic_waiting)
            self._arm(NIC_ROOM, now + delay)

    def _on_nic_room(self) -> None:
        """Turns for the blocked QPs in the line's order, a packet each, round after round
        while the first one's ports have room for its turn (one still blocked queues again);
        then the line turns, so that QPs sharing a port take turns at being first. Run by
        _Timers._fire, whose flush sends what the QPs have to send."""
        nic, waiting_line = self.nic, self._nic_waiting
        while waiting_line:
            waiting = list(waiting_line)
            waiting_line.clear()
            for qp in waiting:
                self._kick(qp, turn=True)
            if nic is None or not waiting_line:
                break
            first = waiting_line[0]
            planes = self._by_qpn[first.qpn][2].plane_set
            if (nic.budget(planes, self.loop.time())
                    < len(planes) * (first.cfg.mss + PACKET_OVERHEAD)):
                break
        waiting_line.rotate(-1)
        self._wake_on_nic_room()

    def _deliver(self, qp: QueuePair) -> None:
        peer = self._by_qpn[qp.qpn][0]
        while qp.events:
            event = qp.events.popleft()
            if isinstance(event, WriteDone):
                pending = self._writes.pop((qp.qpn, event.msg_id))
                pending.stats.append(event.stats)
                if len(pending.stats) == pending.parts and not pending.future.done():
                    stats = _merge(pending.stats)
                    stats.start += self.wall_offset  # the QPs' clock is the loop's
                    stats.end += self.wall_offset
                    pending.future.set_result(stats)
            elif isinstance(event, ImmArrived):
                key = (peer, event.imm)
                self._imms[key] += 1
                waiter = self._imm_waiters.get(key)
                if waiter is not None and self._imms[key] >= len(self._peers[peer]):
                    del self._imm_waiters[key]
                    if not waiter.done():  # cancelled (a timeout, SIGTERM): nobody waits
                        waiter.set_result(None)
            elif isinstance(event, QPFailed):
                self._fail(f"QP to rank {peer}: {event.reason}")

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
        error = TransportFailed(self.failure)
        for pending in self._writes.values():
            if not pending.future.done():
                pending.future.set_exception(error)
        for waiter in self._imm_waiters.values():
            if not waiter.done():
                waiter.set_exception(error)


def _merge(parts: list[MessageStats]) -> MessageStats:
    evs = sorted({ev for p in parts for ev in p.evs_used})
    return MessageStats(parts[0].peer, sum(p.size for p in parts), min(p.start for p in parts),
                        max(p.end for p in parts), sum(p.retransmits for p in parts),
                        sum(p.trims for p in parts), evs)
