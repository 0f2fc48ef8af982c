"""A queue pair (one end of a connection between two ranks), sans-IO: no sockets, no clock.

The IO driver feeds it datagrams (`receive`) and the time (`on_timer`), and sends what
`poll_transmit` returns: (EV index, bytes) pairs; the EV index says which path (uSID address)
a packet takes. Writes are posted with `post_write`; completions (a write acknowledged, an
immediate arrived, the QP failed) are queued in `events`.

Shared here by both transports: segmentation of writes into packets, placement of payloads at
their offset in the registered buffer, WRITE_WITH_IMM completing only when every earlier byte
of the connection landed, ACK generation, the retransmission timer with linear then
exponential backoff and a retry budget, and per-message statistics. `MrcQP` (mrc.py) and
`RoceQP` (rocev2.py) add what differs: path choice, loss reaction, receive order.
"""
from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field

from . import nic, wire
from .cc import CCConfig, WindowCC
from .endpoint import MessageStats


@dataclass
class QPConfig:
    mss: int = 1024  # payload bytes per packet
    init_cwnd: int = 64 * 1024
    max_cwnd: int = 256 * 1024
    base_rto: float = 0.010  # seconds before the first retransmission (at least srtt + 4 rttvar)
    linear_retries: int = 7  # then the backoff doubles (MRC: linear up to 7, then exponential)
    retry_budget: int = 14  # attempts of one packet before the QP fails
    ack_every: int = 4  # ACK after this many packets unless something needs an ACK now
    ack_delay: float = 0.0005  # longest an ACK waits for company
    target_delay: float = 0.002


def _wire_bytes(p: _Packet) -> int:
    """What a data packet occupies on the line: payload, our header, UDP/IPv6/Ethernet."""
    return p.length + wire.HEADER_SIZE + nic.FRAME_OVERHEAD


class AccessError(ValueError):
    """A write outside the registered buffer."""


@dataclass
class WriteDone:
    msg_id: int
    stats: MessageStats


@dataclass
class ImmArrived:
    imm: int


@dataclass
class QPFailed:
    reason: str


@dataclass
class _Message:
    msg_id: int
    data: memoryview
    remote_offset: int
    imm: int | None
    stats: MessageStats
    unacked: int = 0
    evs: set[int] = field(default_factory=set)


@dataclass
class _Packet:
    psn: int
    msg: _Message
    start: int  # offset in msg.data
    length: int
    flags: int
    ev: int = 0
    sent_at: float = 0.0
    attempts: int = 0
    deadline: float = 0.0


def backoff(cfg: QPConfig, attempt: int, base: float | None = None) -> float:
    """Timeout before attempt `attempt`+1: linear for `linear_retries`, then doubling."""
    base = cfg.base_rto if base is None else base
    if attempt <= cfg.linear_retries:
        return base * attempt
    return base * cfg.linear_retries * 2 ** (attempt - cfg.linear_retries)


def _us(now: float) -> int:
    return int(now * 1e6) & 0xFFFFFFFF


class QueuePair:
    """Both directions of one connection: outgoing writes and incoming ones from the peer."""

    def __init__(self, qpn: int, peer_qpn: int, buffer: memoryview, cfg: QPConfig,
                 cc: WindowCC, seed: int) -> None:
        self.qpn, self.peer_qpn = qpn, peer_qpn
        self.buffer = buffer
        self.cfg = cfg
        self.cc = cc
        self.rng = random.Random(seed)
        self.events: deque = deque()
        self.failed: str | None = None
        self.nic_blocked = False  # the last poll left data for want of NIC room
        self.counters = {"data_sent": 0, "retransmits": 0, "acks_sent": 0, "nacks_sent": 0,
                         "trims_received": 0, "corrupt": 0, "duplicates": 0, "out_of_order": 0,
                         "dropped_out_of_order": 0, "timeouts": 0, "placed_bytes": 0,
                         "access_errors": 0}
        self.last_access_error: str | None = None
        # sender
        self._next_msg_packets: deque[_Packet] = deque()
        self._next_psn = 0
        self._inflight: dict[int, _Packet] = {}
        self._inflight_bytes = 0
        self._lowest_unacked = 0
        self._resend: deque[int] = deque()
        self._timers: list[tuple[float, int, int]] = []  # (deadline, psn, attempts)
        self._out: list[tuple[int, bytes]] = []
        # receiver
        self._cum = 0  # every PSN below this has landed
        self._got: set[int] = set()
        self._pending_imm: list[tuple[int, int]] = []  # (last psn of the write, imm)
        self._ack_owed = 0
        self._ack_deadline: float | None = None
        self._ack_for: tuple[int, int, int, bool] | None = None  # psn, ev, ts, ecn

    # ---- posting ----
    def post_write(self, msg_id: int, data: memoryview, remote_offset: int,
                   imm: int | None, now: float, peer: int) -> None:
        if self.failed:
            raise RuntimeError(f"QP {self.qpn} has failed: {self.failed}")
        msg = _Message(msg_id, data, remote_offset, imm, MessageStats(peer, len(data), now, 0.0))
        mss = self.cfg.mss
        starts = list(range(0, len(data), mss)) or [0]
        for k, start in enumerate(starts):
            last = k == len(starts) - 1
            flags = (wire.LAST if last else 0) | (wire.IMM if last and imm is not None else 0)
            self._next_msg_packets.append(
                _Packet(-1, msg, start, min(mss, len(data) - start), flags))
        msg.unacked = len(starts)

    # ---- to the wire ----
    def _data_datagram(self, p: _Packet, now: float, prev: int) -> bytes:
        m = p.msg
        h = wire.Header(wire.DATA, p.flags | (wire.RETX if p.attempts > 1 else 0), p.ev,
                        p.length, self.peer_qpn, p.psn, m.remote_offset + p.start,
                        m.imm if p.flags & wire.IMM else 0, prev, _us(now))
        return wire.encode(h, m.data[p.start:p.start + p.length])

    def _send_packet(self, p: _Packet, now: float) -> None:
        p.attempts += 1
        p.sent_at = now
        p.deadline = now + backoff(self.cfg, p.attempts, self._rto_base())
        heapq.heappush(self._timers, (p.deadline, p.psn, p.attempts))
        p.msg.evs.add(p.ev)
        self._out.append((p.ev, self._data_datagram(p, now, self._prev_on_path(p))))
        self.counters["data_sent"] += 1
        if p.attempts > 1:
            self.counters["retransmits"] += 1
            p.msg.stats.retransmits += 1

    def _rto_base(self) -> float:
        """The configured timeout, or more when the measured RTT needs it: emulated hosts share
        two cores, and a timeout shorter than their scheduling delay is a false loss (which
        would condemn a healthy EV)."""
        cc = self.cc
        if cc.srtt is None:
            return self.cfg.base_rto
        return max(self.cfg.base_rto, cc.srtt + 4 * cc.rttvar)

    def _control(self, kind: int, flags: int, ev: int, psn: int, offset: int = 0,
                 imm: int = 0, ts: int = 0) -> None:
        h = wire.Header(kind, flags, ev, 0, self.peer_qpn, psn, offset, imm, 0, ts)
        self._out.append((ev, wire.encode(h)))

    def poll_transmit(self, now: float, budget: float | None = None) -> list[tuple[int, bytes]]:
        """Datagrams to send now: control first, then resends, then new data the window
        allows. `budget`: wire bytes of data the NIC can take now (None: no limit); data that
        does not fit stays here untimed, and `nic_blocked` says so (hostagent/nic.py)."""
        self.nic_blocked = False
        if self.failed:
            self._out.clear()
            return []
        self._flush_ack(now, force=False)
        room = self._transmit_resends(now, float("inf") if budget is None else budget)
        while self._next_msg_packets:
            p = self._next_msg_packets[0]
            if not self.cc.allows(self._inflight_bytes, p.length):
                break
            if _wire_bytes(p) > room:
                self.nic_blocked = True
                break
            room -= _wire_bytes(p)
            self._next_msg_packets.popleft()
            p.psn = self._next_psn
            self._next_psn += 1
            p.ev = self._path_for_new(now)
            self._inflight[p.psn] = p
            self._inflight_bytes += p.length
            self._send_packet(p, now)
        out, self._out = self._out, []
        return out

    # ---- timers ----
    def next_deadline(self) -> float | None:
        while self._timers:
            deadline, psn, attempts = self._timers[0]
            p = self._inflight.get(psn)
            if p is not None and p.attempts == attempts:
                break
            heapq.heappop(self._timers)
        times = [t for t in (self._timers[0][0] if self._timers else None, self._ack_deadline,
                             self._extra_deadline()) if t is not None]
        return min(times) if times else None

    def on_timer(self, now: float) -> None:
        if self._ack_deadline is not None and now >= self._ack_deadline:
            self._flush_ack(now, force=True)
        while self._timers and self._timers[0][0] <= now:
            _, psn, attempts = heapq.heappop(self._timers)
            p = self._inflight.get(psn)
            if p is None or p.attempts != attempts:
                continue  # acked or resent since
            self.counters["timeouts"] += 1
            if p.attempts >= self.cfg.retry_budget:
                self._fail(f"PSN {psn} unacknowledged after {p.attempts} attempts "
                           f"(last on EV {p.ev})")
                return
            self.cc.on_timeout(now)
            self._on_timeout(p, now)
        self._extra_timers(now)

    def _fail(self, reason: str) -> None:
        self.failed = reason
        self.events.append(QPFailed(reason))

    # ---- from the wire ----
    def receive(self, datagram: bytes, now: float, ecn: bool = False) -> None:
        try:
            h, payload = wire.decode(datagram)
        except wire.WireError:
            self.counters["corrupt"] += 1
            return
        if h.type == wire.DATA:
            try:
                self._receive_data(h, payload, now, ecn)
            except AccessError as exc:
                # RDMA's remote access error: the packet is refused, never half-placed
                self.counters["access_errors"] += 1
                self.last_access_error = str(exc)
        elif h.type == wire.ACK:
            self._receive_ack(h, now)
        elif h.type == wire.NACK:
            self._receive_nack(h, now)
        else:
            self._receive_probe(h, now)

    def _place(self, h: wire.Header, payload: memoryview) -> None:
        end = h.offset + h.length
        if end > len(self.buffer):
            raise AccessError(f"QP {self.qpn}: write to [{h.offset}, {end}) outside the "
                              f"{len(self.buffer)}-byte buffer")
        self.buffer[h.offset:end] = payload
        self.counters["placed_bytes"] += h.length
        if h.flags & wire.IMM:
            heapq.heappush(self._pending_imm, (h.psn, h.imm))

    def _landed(self, psn: int) -> None:
        """Record an arrival; move the cumulative point; complete imms now fully preceded."""
        if psn == self._cum:
            self._cum += 1
            while self._cum in self._got:
                self._got.discard(self._cum)
                self._cum += 1
        else:
            self._got.add(psn)
        while self._pending_imm and self._pending_imm[0][0] < self._cum:
            self.events.append(ImmArrived(heapq.heappop(self._pending_imm)[1]))

    def _owe_ack(self, h: wire.Header, now: float, ecn: bool, urgent: bool) -> None:
        self._ack_owed += 1
        self._ack_for = (h.psn, h.ev, h.ts, ecn or bool(self._ack_for and self._ack_for[3]))
        if urgent or ecn or self._ack_owed >= self.cfg.ack_every:
            self._flush_ack(now, force=True)
        elif self._ack_deadline is None:
            self._ack_deadline = now + self.cfg.ack_delay

    def _flush_ack(self, now: float, force: bool) -> None:
        if self._ack_for is None or not (force or (self._ack_deadline is not None
                                                   and now >= self._ack_deadline)):
            return
        psn, ev, ts, ecn = self._ack_for
        # The 64-bit SACK window ends at the PSN that triggered this ACK (UET places it with an
        # offset too): with spraying, what the sender needs to hear about is the newest arrivals,
        # which can lie far beyond a hole at the cumulative point.
        base = max(self._cum + 1, psn - 63)
        bitmap = 0
        for q in self._got:
            if base <= q < base + 64:
                bitmap |= 1 << (q - base)
        h = wire.Header(wire.ACK, wire.ECN if ecn else 0, ev, 0, self.peer_qpn, self._cum,
                        bitmap, psn, base, ts)
        self._out.append((ev, wire.encode(h)))
        self.counters["acks_sent"] += 1
        self._ack_owed, self._ack_for, self._ack_deadline = 0, None, None

    def _receive_ack(self, h: wire.Header, now: float) -> None:
        newly = [psn for psn in range(self._lowest_unacked, h.psn) if psn in self._inflight]
        bitmap = h.offset
        while bitmap:
            bit = bitmap & -bitmap
            psn = h.aux + bit.bit_length() - 1
            if psn in self._inflight:
                newly.append(psn)
            bitmap ^= bit
        rtt = None
        trigger = self._inflight.get(h.imm)
        if trigger is not None and trigger.attempts == 1:
            rtt = ((_us(now) - h.ts) & 0xFFFFFFFF) / 1e6
        acked = 0
        for psn in newly:
            acked += self._ack_packet(psn, now)
        self._lowest_unacked = max(self._lowest_unacked, h.psn)
        self._on_path_feedback(h.ev, now, bool(h.flags & wire.ECN))
        self.cc.on_ack(now, acked, rtt, bool(h.flags & wire.ECN))
        self._after_ack(h, now)

    def _ack_packet(self, psn: int, now: float) -> int:
        p = self._inflight.pop(psn)
        self._inflight_bytes -= p.length
        m = p.msg
        m.unacked -= 1
        if m.unacked == 0:
            m.stats.end = now
            m.stats.evs_used = sorted(m.evs)
            self.events.append(WriteDone(m.msg_id, m.stats))
        return p.length

    def _resend_now(self, psn: int) -> None:
        if psn in self._inflight and psn not in self._resend:
            self._resend.append(psn)

    def _transmit_resends(self, now: float, room: float) -> float:
        """Resend what is due, within `room` wire bytes; the room left."""
        while self._resend:
            p = self._inflight.get(self._resend[0])
            if p is None:
                self._resend.popleft()
                continue
            if _wire_bytes(p) > room:
                self.nic_blocked = True
                break
            room -= _wire_bytes(p)
            self._resend.popleft()
            p.ev = self._path_for_resend(p, now)
            self._send_packet(p, now)
        return room

    # ---- what the transports define ----
    def _path_for_new(self, now: float) -> int:
        raise NotImplementedError

    def _path_for_resend(self, p: _Packet, now: float) -> int:
        raise NotImplementedError

    def _prev_on_path(self, p: _Packet) -> int:
        return wire.NO_PSN

    def _receive_data(self, h: wire.Header, payload: memoryview, now: float,
                      ecn: bool) -> None:
        raise NotImplementedError

    def _receive_nack(self, h: wire.Header, now: float) -> None:
        raise NotImplementedError

    def _receive_probe(self, h: wire.Header, now: float) -> None:
        pass

    def _on_timeout(self, p: _Packet, now: float) -> None:
        raise NotImplementedError

    def _on_path_feedback(self, ev: int, now: float, ecn: bool) -> None:
        """An ACK came back for a packet sent on `ev`, CE-marked or not."""

    def _after_ack(self, h: wire.Header, now: float) -> None:
        pass

    def _extra_deadline(self) -> float | None:
        return None

    def _extra_timers(self, now: float) -> None:
        pass


def window(cfg: QPConfig, **overrides) -> WindowCC:
    return WindowCC(CCConfig(cfg.mss, cfg.init_cwnd, cfg.max_cwnd,
                             target_delay=cfg.target_delay, **overrides))
