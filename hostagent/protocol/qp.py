"""A queue pair (one end of a connection between two ranks), sans-IO: no sockets, no clock.

The IO driver feeds it datagrams (`receive`) and the time (`on_timer`), and sends what
`poll_transmit` returns: (EV index, bytes) pairs; the EV index says which path (uSID address)
a packet takes. Writes are posted with `post_write`; completions (a write acknowledged, an
immediate arrived, the QP failed) are queued in `events`.

Shared here by both transports: segmentation of writes into packets, placement of payloads at
their offset in the registered buffer, WRITE_WITH_IMM completing only when every earlier byte
of the connection landed, ACK generation, the retransmission timer with linear then
exponential backoff of the spec (timeout, retry.linear_cnt, retry.exp_cnt: a packet's
consecutive *timeouts* count, reset whenever the QP makes progress; resends after a NACK or a
trim are not timeouts), and per-message statistics. Every ACK is an RTT sample (it echoes the
send time of the copy that triggered it, resent or not; `karn`), the timeout is at least srtt
+ 4 rttvar, and a timer that comes due after the timeout rose, or after the news its
transport counts from (`_heard_on`), starts again: a path whose RTT exceeds the configured
timeout converges. Timers counted from the QP's last response are one timer per QP in effect
(RoCEv2's). `MrcQP` (mrc.py) and `RoceQP` (rocev2.py) add what differs: path choice, loss
reaction, receive order.
"""
from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass
from typing import Final

from hostagent.protocol import nic, wire
from hostagent.protocol.constants import MPR
from hostagent.protocol.dcqcn import DcqcnCC
from hostagent.protocol.endpoint import MessageStats
from hostagent.protocol.nscc import NsccCC, NsccConfig

_decode, _DATA = wire.decode, wire.DATA

TIMEOUT_UNIT: Final = 1.024e-6  # s: MRC's ACK timeout is TIMEOUT_UNIT x 2^timeout (mrc.h)
# s: an RC QP's local ACK timeout is 4.096 us x 2^timeout (the InfiniBand spec's, which RoCEv2
# RNICs and the verbs' ibv_qp_attr.timeout use; Linux's qib and rxe drivers compute it so)
ROCE_TIMEOUT_UNIT: Final = 4.096e-6
MAX_TIMEOUT_EXP: Final = 24  # mrc.h: timeout at most 24 (17.2 s)
MAX_LINEAR_CNT: Final = 7  # mrc.h: retry.linear_cnt at most 7
MAX_EXP_CNT: Final = 25  # mrc.h: retry.exp_cnt at most 25, and 25 means retry forever
EXP_FOREVER: Final = MAX_EXP_CNT
MAX_RETRY_INTERVAL: Final = TIMEOUT_UNIT * 2 ** MAX_TIMEOUT_EXP  # the doubling stops there
MAX_MPR: Final = 255  # mrc.h: mpr is a uint8_t
NO_PSN_RANGE: Final = 1 << 62  # a QP whose outstanding PSNs nothing limits but its window


def timeout_unit(transport: str) -> float:
    """The unit of a transport's `timeout` exponent, s: MRC's 1.024 us, RoCEv2's 4.096 us."""
    return ROCE_TIMEOUT_UNIT if transport == "rocev2" else TIMEOUT_UNIT


def timeout_seconds(timeout_exp: int, unit: float = TIMEOUT_UNIT) -> float:
    """A `timeout` exponent in seconds: unit x 2^timeout_exp (MRC's unit unless given)."""
    factor: int = 2 ** timeout_exp  # int ** int is Any to mypy (a negative exponent is float)
    return unit * factor


@dataclass
class QPConfig:
    """A QP's settings; the names are the scenario's (`qp.*`), so that nothing is renamed
    between the file a user writes and the code that runs it."""

    mss: int = 1024  # payload bytes per packet
    init_cwnd: int = 64 * 1024
    max_cwnd: int = 256 * 1024
    timeout: float = 0.010  # s: the ACK timeout (at least srtt + 4 rttvar, see _timeout)
    linear_cnt: int = 7  # retries at the fixed interval `timeout` (spec: <= 7)
    exp_cnt: int = 5  # then retries with the interval doubling (spec: <= 25, 25 = forever)
    ack_every: int = 4  # ACK after this many packets unless something needs an ACK now
    ack_delay: float = 0.0005  # longest an ACK waits for company
    target_delay: float = 0.002
    line_rate: float | None = None  # bit/s of a host port (DCQCN starts there); None: 100G
    # s: the path's RTT without queueing (testbed/run/traffic.py computes it), which DCQCN's
    # timers are ratios to (dcqcn.py); a RoCEv2 QP needs it
    base_rtt: float | None = None
    # s: where the doubling retry interval stops (mrc.h's largest timeout, D times longer in
    # a dilated run: testbed/fabric/timers.py)
    max_retry_interval: float = MAX_RETRY_INTERVAL
    # MRC: the PSNs a requester may have outstanding past the cumulative ACK, in mrc.h's units
    # of 128 (constants.MPR); RoCEv2 has no such limit here
    mpr: int = MPR


def retry_interval(cfg: QPConfig, timeouts: int, base: float | None = None) -> float:
    """The timer of a packet that has already timed out `timeouts` times in a row: `base` for
    the first send and the `linear_cnt` retries after it, then doubling per retry."""
    base = cfg.timeout if base is None else base
    if timeouts <= cfg.linear_cnt:
        return base
    factor: int = 2 ** (timeouts - cfg.linear_cnt)  # int ** int is Any to mypy
    return min(base * factor, max(base, cfg.max_retry_interval))


def retries_exhausted(cfg: QPConfig, timeouts: int) -> bool:
    """`timeouts` consecutive timeouts of one packet use up the linear and exponential retries
    (never, with exp_cnt = 25)."""
    return cfg.exp_cnt < EXP_FOREVER and timeouts > cfg.linear_cnt + cfg.exp_cnt


def time_to_fail(cfg: QPConfig, base: float | None = None) -> float:
    """Seconds from a packet's send until its QP fails if no ACK ever comes (inf: never)."""
    if cfg.exp_cnt >= EXP_FOREVER:
        return float("inf")
    return sum(retry_interval(cfg, n, base) for n in range(cfg.linear_cnt + cfg.exp_cnt + 1))


# line bytes of a packet beyond its payload
PACKET_OVERHEAD: Final = wire.HEADER_SIZE + nic.FRAME_OVERHEAD


def wire_bytes(p: Packet) -> int:
    """What a data packet occupies on the line: payload, our header, UDP/IPv6/Ethernet."""
    return p.length + PACKET_OVERHEAD


class AccessError(ValueError):
    """A write outside the registered buffer."""


# What a QP makes per packet, per write and per event (these events, Message, Packet): plain
# classes, since compiled, a dataclass's generated __init__ stays interpreted Python that sets
# one attribute at a time; their own constructors are compiled (test_compiled.py).
class WriteDone:
    """A write is acknowledged in full."""

    __slots__ = ("msg_id", "stats")

    def __init__(self, msg_id: int, stats: MessageStats) -> None:
        self.msg_id = msg_id
        self.stats = stats


class ImmArrived:
    """A write with an immediate has landed, with everything before it."""

    __slots__ = ("imm",)

    def __init__(self, imm: int) -> None:
        self.imm = imm


class QPFailed:
    """The QP gave up (retries exhausted): `reason` says where, `at` when (the QP's clock),
    after `timeouts` consecutive timeouts of one packet; `budget` is how long its retries
    lasted from a packet's send with the timer it had then (`time_to_fail`)."""

    __slots__ = ("at", "budget", "reason", "timeouts")

    def __init__(self, reason: str, at: float, timeouts: int, budget: float) -> None:
        self.reason, self.at, self.timeouts, self.budget = reason, at, timeouts, budget


@dataclass
class QPCounters:
    """What a QP counts (qps.parquet has one column per field)."""

    data_sent: int = 0
    retransmits: int = 0
    acks_sent: int = 0
    nacks_sent: int = 0
    trims_received: int = 0
    corrupt: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    dropped_out_of_order: int = 0
    timeouts: int = 0  # timer expiries: per timer pass, one per path on which packets expired
    packet_timeouts: int = 0  # packets that timed out (a window's packets expiring together)
    cnps_sent: int = 0  # RoCEv2's notification point: CNPs sent for CE-marked arrivals
    placed_bytes: int = 0
    access_errors: int = 0
    probes_sent: int = 0
    probe_replies: int = 0
    tail_probes: int = 0  # MRC: tail-loss probes sent (recovery.py)
    rack_losses: int = 0  # MRC: losses found by RACK, before the ACK timeout
    stalls: int = 0  # MRC: timeout bursts taken for a host stall (evs.py)
    spurious_timeouts: int = 0  # timeouts whose packet's earlier copy was acknowledged after
    rearmed: int = 0  # timers restarted when due: the timeout rose, or the path delivered, since


class Message:
    """One posted write: its bytes and what its packets have left to be acknowledged."""

    __slots__ = ("msg_id", "data", "remote_offset", "imm", "stats", "unacked", "evs")

    def __init__(self, msg_id: int, data: memoryview, remote_offset: int, imm: int | None,
                 stats: MessageStats) -> None:
        self.msg_id = msg_id
        self.data = data
        self.remote_offset = remote_offset
        self.imm = imm
        self.stats = stats
        self.unacked = 0
        self.evs: set[int] = set()


class Packet:
    """One packet of a message, from its posting to its acknowledgement."""

    __slots__ = ("psn", "msg", "start", "length", "flags", "ev", "sent_at", "sends",
                 "timeouts", "epoch", "deadline", "clock", "timed_out_at")

    def __init__(self, psn: int, msg: Message, start: int, length: int, flags: int) -> None:
        self.psn = psn
        self.msg = msg
        self.start = start  # offset in msg.data
        self.length = length
        self.flags = flags
        self.ev = 0
        self.sent_at = 0.0
        self.sends = 0  # transmissions so far (a resend for any reason counts)
        self.timeouts = 0  # consecutive timeouts (only timeouts; reset when the QP progresses)
        self.epoch = 0  # the QP's progress count when `timeouts` was last counted
        self.deadline = 0.0
        self.clock = 0.0  # when its timer started: its last send, or its last timeout if held
        self.timed_out_at = -1.0  # when it last timed out (its ACK may show that was spurious)


def us_clock(now: float) -> int:
    """The 32-bit microsecond timestamp packets carry (echoed back for RTTs)."""
    return int(now * 1e6) & 0xFFFFFFFF


class QueuePair:
    """Both directions of one connection: outgoing writes and incoming ones from the peer."""

    # The ACK's echo of the triggering copy's send time is an RTT sample even for a resent
    # packet, and tells a spurious timeout (MRC, as UET's ACKs). True: Karn's rule instead, for
    # a transport whose real headers carry no send time (RoCEv2's BTH/AETH).
    karn = False

    def __init__(self, qpn: int, peer_qpn: int, buffer: memoryview, cfg: QPConfig,
                 cc: NsccCC | DcqcnCC, seed: int) -> None:
        self.qpn, self.peer_qpn = qpn, peer_qpn
        self.buffer = buffer
        self.cfg = cfg
        self.cc = cc
        self.rng = random.Random(seed)
        self.events: deque[WriteDone | ImmArrived | QPFailed] = deque()
        self.failed: str | None = None  # why it gave up; the whole record in `failure`
        self.failure: QPFailed | None = None
        self.nic_blocked = False  # the last poll left data for want of NIC room
        self.counters = QPCounters()
        self.last_access_error: str | None = None
        # sender
        self._next_msg_packets: deque[Packet] = deque()
        self._next_psn = 0
        self._inflight: dict[int, Packet] = {}  # in PSN order (inserted at the first send)
        # The same PSNs in the order of their last send, so send times never decrease along it:
        # the packets sent before a given moment are its first few (MRC's RACK reads only
        # those, where scanning the whole window per ACK was most of its CPU on one path).
        self._send_order: dict[int, None] = {}
        self._inflight_bytes = 0
        self._lowest_unacked = 0
        # no new PSN at or past this distance from the cumulative ACK (MrcQP: its MPR)
        self._psn_range = NO_PSN_RANGE
        self._resend: deque[int] = deque()
        self._timers: list[tuple[float, int, int]] = []  # (deadline, psn, sends)
        self._progress = 0  # ACKs that acknowledged something new: resets timeout counts
        self._pace_wait: float | None = None  # the rate control's next send time, if waiting
        self._out: list[tuple[int, bytes]] = []
        # receiver
        self._cum = 0  # every PSN below this has landed
        self._got: set[int] = set()
        self._pending_imm: list[tuple[int, int]] = []  # (last psn of the write, imm)
        self._ack_owed = 0  # packets the next ACK answers (0: no ACK owed)
        self._ack_deadline: float | None = None
        # what the owed ACK echoes of its trigger: PSN, EV, send time and CE mark (fields, not
        # a tuple: one would be built per packet received)
        self._ack_psn = self._ack_ev = self._ack_ts = 0
        self._ack_ecn = False

    # ---- posting ----
    def post_write(self, msg_id: int, data: memoryview, remote_offset: int,
                   imm: int | None, now: float, peer: int) -> None:
        if self.failed:
            raise RuntimeError(f"QP {self.qpn} has failed: {self.failed}")
        size = len(data)
        msg = Message(msg_id, data, remote_offset, imm, MessageStats(peer, size, now, 0.0))
        mss = self.cfg.mss
        starts = range(0, size, mss) or range(1)
        last = starts[-1]
        queue = self._next_msg_packets
        for start in starts[:-1]:
            queue.append(Packet(-1, msg, start, mss, 0))
        queue.append(Packet(-1, msg, last, size - last,
                            wire.LAST | (wire.IMM if imm is not None else 0)))
        msg.unacked = len(starts)

    # ---- to the wire ----
    def _data_datagram(self, p: Packet, now: float, prev: int) -> bytes:
        m = p.msg
        start = p.start
        return wire.data_datagram(p.flags | (wire.RETX if p.sends > 1 else 0), p.ev, p.length,
                                  self.peer_qpn, p.psn, m.remote_offset + start,
                                  m.imm if p.flags & wire.IMM and m.imm is not None else 0,
                                  prev, int(now * 1e6) & 0xFFFFFFFF,  # us_clock(now)
                                  m.data[start:start + p.length])

    def _send_packet(self, p: Packet, now: float, base: float) -> None:
        """Send `p` now; `base` is `_timeout()`, which the caller computes once per poll."""
        sends = p.sends = p.sends + 1
        p.sent_at = p.clock = now
        order = self._send_order
        if sends > 1:
            del order[p.psn]
        order[p.psn] = None
        if p.epoch != self._progress:
            p.timeouts, p.epoch = 0, self._progress
        cfg = self.cfg  # _expiry inlined (a send is its timer's start): asked for every packet
        p.deadline = deadline = now + (base if p.timeouts <= cfg.linear_cnt
                                       else retry_interval(cfg, p.timeouts, base))
        heapq.heappush(self._timers, (deadline, p.psn, sends))
        p.msg.evs.add(p.ev)
        self._out.append((p.ev, self._data_datagram(p, now, self._prev_on_path(p))))
        self.cc.on_send(now, p.length + PACKET_OVERHEAD)
        counters = self.counters
        counters.data_sent += 1
        if sends > 1:
            counters.retransmits += 1
            p.msg.stats.retransmits += 1

    def _expiry(self, p: Packet, base: float) -> float:
        """When `p` times out: the retry schedule's interval from `base` (`_timeout()`), counted
        from its timer's start or from the last sign of life of its path, whichever is later."""
        cfg = self.cfg
        start = max(p.clock, self._heard_on(p.ev))
        return start + (base if p.timeouts <= cfg.linear_cnt
                        else retry_interval(cfg, p.timeouts, base))

    def _arm(self, p: Packet, base: float) -> None:
        p.deadline = deadline = self._expiry(p, base)
        heapq.heappush(self._timers, (deadline, p.psn, p.sends))

    def _timeout(self) -> float:
        """The configured timeout, or more when the measured RTT needs it: emulated hosts share
        two cores, and a timeout shorter than their scheduling delay is a false loss (which
        would condemn a healthy EV)."""
        cc = self.cc
        if cc.srtt is None:
            return self.cfg.timeout
        return max(self.cfg.timeout, cc.srtt + 4 * cc.rttvar)

    def _control(self, kind: int, flags: int, ev: int, psn: int, offset: int = 0,
                 imm: int = 0, ts: int = 0) -> None:
        self._out.append((ev, wire.control_datagram(kind, flags, ev, self.peer_qpn, psn, offset,
                                                    imm, 0, ts)))

    def poll_transmit(self, now: float, budget: float | None = None) -> list[tuple[int, bytes]]:
        """Datagrams to send now: control first, then resends, then new data the window
        allows. `budget`: wire bytes of data the NIC can take now (None: no limit); data that
        does not fit stays here untimed, and `nic_blocked` says so (hostagent/protocol/nic.py)."""
        self.nic_blocked = False
        if self.failed:
            self._out.clear()
            return []
        if self._ack_owed:
            self._flush_ack(now, force=False)
        self._pace_wait = None
        room = float("inf") if budget is None else budget
        base = self._timeout()
        if self._resend:
            room = self._transmit_resends(now, room, base)
        queue = self._next_msg_packets
        if queue:
            allows, inflight, send = self.cc.allows, self._inflight, self._send_packet
            psn_end = self._lowest_unacked + self._psn_range
            while queue:
                p = queue[0]
                length = p.length
                if self._next_psn >= psn_end:
                    break
                if not allows(self._inflight_bytes, length, now):
                    self._note_pacing(now)
                    break
                if length + PACKET_OVERHEAD > room:
                    self.nic_blocked = True
                    break
                room -= length + PACKET_OVERHEAD
                queue.popleft()
                p.psn = psn = self._next_psn
                self._next_psn = psn + 1
                p.ev = self._path_for_new(now)
                inflight[psn] = p
                self._inflight_bytes += length
                send(p, now, base)
        out, self._out = self._out, []
        return out

    def _note_pacing(self, now: float) -> None:
        """The rate control (DCQCN) holds the next packet until its send time: wake then."""
        wake = self.cc.next_send_time()
        if wake is not None and wake > now:
            self._pace_wait = wake

    # ---- timers ----
    def next_deadline(self) -> float | None:
        timers, inflight = self._timers, self._inflight
        while timers:
            deadline, psn, sends = timers[0]
            p = inflight.get(psn)
            if p is not None and p.sends == sends:
                break
            heapq.heappop(timers)
        first = timers[0][0] if timers else None
        for t in (self._ack_deadline, self._extra_deadline(), self._pace_wait):
            if t is not None and (first is None or t < first):
                first = t
        return first

    def on_timer(self, now: float) -> None:
        if self._ack_deadline is not None and now >= self._ack_deadline:
            self._flush_ack(now, force=True)
        if self._pace_wait is not None and now >= self._pace_wait:
            self._pace_wait = None
        base = None
        expired_on: set[int] = set()  # paths with an expiry in this pass
        while self._timers and self._timers[0][0] <= now:
            _, psn, sends = heapq.heappop(self._timers)
            p = self._inflight.get(psn)
            if p is None or p.sends != sends:
                continue  # acked or resent since
            if p.epoch != self._progress:
                p.timeouts, p.epoch = 0, self._progress
            if base is None:
                base = self._timeout()
            if self._expiry(p, base) > now:
                # The RTT estimate rose, or its path delivered, since its timer started: it is
                # not late by what the QP now knows (TCP restarts its one timer at every ACK
                # that brings news, RFC 6298 5.3). Without this, a window sent before the
                # first RTT samples showed a queue longer than the timeout all timed out,
                # and was all resent, while its first packets' ACKs were arriving.
                self._arm(p, base)
                self.counters.rearmed += 1
                continue
            self.counters.packet_timeouts += 1
            expired_on.add(p.ev)
            p.timeouts += 1
            p.timed_out_at = now
            if retries_exhausted(self.cfg, p.timeouts):
                self.counters.timeouts += len(expired_on)
                self._fail(QPFailed(f"PSN {psn} unacknowledged after {p.timeouts} timeouts in "
                                    f"a row ({p.sends} sends, last on EV {p.ev})", now,
                                    p.timeouts, time_to_fail(self.cfg, base)))
                return
            self._timeout_cut(p, now)
            self._on_timeout(p, now)
        self.counters.timeouts += len(expired_on)
        self._extra_timers(now)

    def _fail(self, failure: QPFailed) -> None:
        self.failed, self.failure = failure.reason, failure
        self.events.append(failure)

    # ---- from the wire ----
    def receive(self, datagram: bytes, now: float, ecn: bool = False) -> None:
        try:
            h, payload = _decode(datagram)
        except wire.WireError:
            self.counters.corrupt += 1
            return
        if h.type == _DATA:
            try:
                self._receive_data(h, payload, now, ecn)
            except AccessError as exc:
                # RDMA's remote access error: the packet is refused, never half-placed
                self.counters.access_errors += 1
                self.last_access_error = str(exc)
        elif h.type == wire.ACK:
            self._receive_ack(h, now)
        elif h.type == wire.NACK:
            self._receive_nack(h, now)
        else:
            self._receive_probe(h, now)

    def _place(self, h: wire.Header, payload: memoryview) -> None:
        offset = h.offset
        end = offset + h.length
        buffer = self.buffer
        if end > len(buffer):
            raise AccessError(f"QP {self.qpn}: write to [{offset}, {end}) outside the "
                              f"{len(buffer)}-byte buffer")
        buffer[offset:end] = payload
        self.counters.placed_bytes += h.length
        if h.flags & wire.IMM:
            heapq.heappush(self._pending_imm, (h.psn, h.imm))

    def _landed(self, psn: int) -> None:
        """Record an arrival; move the cumulative point; complete imms now fully preceded."""
        cum = self._cum
        if psn == cum:
            cum += 1
            got = self._got
            if got:
                while cum in got:
                    got.discard(cum)
                    cum += 1
            self._cum = cum
        else:
            self._got.add(psn)
        pending = self._pending_imm
        while pending and pending[0][0] < cum:
            self.events.append(ImmArrived(heapq.heappop(pending)[1]))

    def _owe_ack(self, h: wire.Header, now: float, ecn: bool, urgent: bool) -> None:
        self._ack_owed = owed = self._ack_owed + 1
        # a mark is never held: it sends the ACK now, so an owed ACK echoes only its trigger's
        self._ack_psn, self._ack_ev, self._ack_ts, self._ack_ecn = h.psn, h.ev, h.ts, ecn
        if urgent or ecn or owed >= self.cfg.ack_every:
            self._flush_ack(now, force=True)
        elif self._ack_deadline is None:
            self._ack_deadline = now + self.cfg.ack_delay

    def _flush_ack(self, now: float, force: bool) -> None:
        if not self._ack_owed or not (force or (self._ack_deadline is not None
                                                and now >= self._ack_deadline)):
            return
        psn, ev, ts, ecn = self._ack_psn, self._ack_ev, self._ack_ts, self._ack_ecn
        # The 64-bit SACK window ends at the PSN that triggered this ACK (UET places it with an
        # offset too): with spraying, what the sender needs to hear about is the newest arrivals,
        # which can lie far beyond a hole at the cumulative point.
        base = max(self._cum + 1, psn - 63)
        bitmap = 0
        for q in self._got:
            if base <= q < base + 64:
                bitmap |= 1 << (q - base)
        self._out.append((ev, wire.control_datagram(wire.ACK, wire.ECN if ecn else 0, ev,
                                                    self.peer_qpn, self._cum, bitmap, psn,
                                                    base, ts)))
        self.counters.acks_sent += 1
        self._ack_owed, self._ack_deadline = 0, None

    def _receive_ack(self, h: wire.Header, now: float) -> None:
        newly = [psn for psn in range(self._lowest_unacked, h.psn) if psn in self._inflight]
        bitmap = h.offset
        while bitmap:
            bit = bitmap & -bitmap
            psn = h.aux + bit.bit_length() - 1
            if psn in self._inflight:
                newly.append(psn)
            bitmap ^= bit
        # The ACK echoes the send time of the very copy that triggered it: its RTT is a valid
        # sample even when that packet was sent more than once (Karn's rule is for ACKs that
        # cannot say which copy they answer; RFC 7323's timestamps lift it the same way). With
        # Karn's rule, a queue longer than the timeout made every packet a resend, no sample
        # survived, the timeout never rose, and the QP failed (bench/agent.py, one path).
        rtt = ((us_clock(now) - h.ts) & 0xFFFFFFFF) / 1e6
        trigger = self._inflight.get(h.imm)
        # the copy it echoes was sent before that packet last timed out (in whole us: a resend
        # leaves at the instant of its timeout): the timeout was spurious (RFC 3522, Eifel
        # detection, by the same timestamps)
        spurious = (trigger is not None and trigger.timed_out_at >= 0 and not self.karn and
                    0 < (us_clock(trigger.timed_out_at) - h.ts) & 0xFFFFFFFF < 1 << 31)
        sample: float | None = rtt
        if self.karn and (trigger is None or trigger.sends > 1):
            sample = None
        acked = 0
        for psn in newly:
            acked += self._ack_packet(psn, now)
        if acked:
            self._progress += 1
        self._lowest_unacked = max(self._lowest_unacked, h.psn)
        self._on_path_feedback(h.ev, now, bool(h.flags & wire.ECN))
        self.cc.on_ack(now, acked, sample, bool(h.flags & wire.ECN))
        if spurious and trigger is not None:
            self.counters.spurious_timeouts += 1
            self._spurious_timeout(trigger, now - rtt, now)
        self._after_ack(h, now, trigger, rtt)

    def _ack_packet(self, psn: int, now: float) -> int:
        p = self._inflight.pop(psn)
        del self._send_order[psn]
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

    def _transmit_resends(self, now: float, room: float, base: float) -> float:
        """Resend what is due, within `room` wire bytes; the room left. `base`: `_timeout()`."""
        while self._resend:
            p = self._inflight.get(self._resend[0])
            if p is None:
                self._resend.popleft()
                continue
            if not self.cc.allows(0, p.length, now):  # only the rate gates a resend
                self._note_pacing(now)
                break
            if wire_bytes(p) > room:
                self.nic_blocked = True
                break
            room -= wire_bytes(p)
            self._resend.popleft()
            p.ev = self._path_for_resend(p, now)
            self._send_packet(p, now, base)
        return room

    # ---- what the transports define ----
    def _path_for_new(self, now: float) -> int:
        raise NotImplementedError

    def _path_for_resend(self, p: Packet, now: float) -> int:
        raise NotImplementedError

    def _prev_on_path(self, p: Packet) -> int:
        return wire.NO_PSN

    def _heard_on(self, ev: int) -> float:
        """When the timers of packets sent on `ev` last had news to count from besides their
        send (MRC: an ACK on that EV; RoCEv2: the QP's last ACK, NACK or expiry); -1: none."""
        return -1.0

    def _receive_data(self, h: wire.Header, payload: memoryview, now: float,
                      ecn: bool) -> None:
        raise NotImplementedError

    def _receive_nack(self, h: wire.Header, now: float) -> None:
        raise NotImplementedError

    def _receive_probe(self, h: wire.Header, now: float) -> None:
        pass

    def _on_timeout(self, p: Packet, now: float) -> None:
        raise NotImplementedError

    def _timeout_cut(self, p: Packet, now: float) -> None:
        """The congestion control's reaction to a timeout (MRC cuts only when the loss
        is congestive or a stall: mrc.py)."""
        self.cc.on_timeout(now, p.sent_at)

    def _on_path_feedback(self, ev: int, now: float, ecn: bool) -> None:
        """An ACK came back for a packet sent on `ev`, CE-marked or not."""

    def _after_ack(self, h: wire.Header, now: float, trigger: Packet | None,
                   rtt: float) -> None:
        """After an ACK: `trigger` is the packet whose copy triggered it (None: acknowledged
        before), `rtt` that copy's RTT."""

    def _spurious_timeout(self, p: Packet, sent: float, now: float) -> None:
        """`p` timed out, but its copy sent at `sent` (before the timeout) arrived: the path
        delivers, late (its RTT is already in the estimate: every ACK is a sample)."""

    def _extra_deadline(self) -> float | None:
        return None

    def _extra_timers(self, now: float) -> None:
        pass


def nscc(cfg: QPConfig) -> NsccCC:
    """MRC's congestion control for a QP of these settings."""
    return NsccCC(NsccConfig(cfg.mss, cfg.init_cwnd, cfg.max_cwnd,
                             target_delay=cfg.target_delay))
