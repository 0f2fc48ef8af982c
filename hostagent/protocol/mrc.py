"""MRC: one QP sprays every packet over all its GOOD EVs and recovers each loss on its own.

What this class adds to the shared QP machinery (qp.py):
- the path of every packet is an EV chosen by the EV set (evs.py): the plane, then the active
  GOOD EV, with the fewest of the QP's packets in flight (an ACK clock per plane and path:
  each takes packets at the rate it delivers them), skipping congested EVs for a moment;
- the receiver places packets wherever they land (out of order) and acknowledges with a
  cumulative PSN plus a 64-bit SACK bitmap;
- a trimmed packet (header only) is NACKed at once as TRIMMED: a congestion signal; the sender
  resends it on another EV, takes its bytes off the window (nscc.py), and holds that EV off;
- every data packet names the PSN sent before it on the same EV. Full packets on one path stay
  in order, so when that earlier PSN never arrived (and was not trimmed) it was lost on that
  path: the receiver NACKs it at once as GAP, and the sender resends it elsewhere. (The spec
  names MRC_DEVICE_CAP_TRIM_NACK but publishes no wire format: this per-EV gap NACK is our
  own policy.);
- a GAP or a retransmission timeout is a loss on that EV: unless congestion explains it
  (recent marks or trims on the EV, or its own queueing delay above target), the EV goes
  ASSUMED_BAD (evs.py); ASSUMED_BAD EVs are probed, each probe matched to its reply, and come
  back after a run of answered probes;
- an EV's RTT is sampled only from the copy an ACK answers (the echo names its EV and send
  time), once per copy: what it tells about that path, not a hole's repair time;
- a tail loss (nothing sent after it on its EV to reveal a gap) is found by RACK-TLP
  (recovery.py) well before the ACK timeout, and judged like a gap;
- the losses of one RACK pass are judged together (evs.py): an EV silent through
  SILENT_LOSSES of them in a row is dead (a plane or a leaf gone), not a random loser;
- the timeouts of one timer pass are judged together (evs.py): a burst over more than half
  the active EVs, with the receiver silent, is a host stall, which condemns nothing and
  backs the window off; otherwise
  the window is cut only for a timeout congestion explains (a lossy or dead path is no
  reason to send slower on the others);
- NACK- and trim-driven resends are not timeouts: only timeouts count towards the retry
  schedule (qp.py);
- a queue longer than the ACK timeout (bench/agent.py's one path, where the agents' CPU made a
  window's RTT 30-60 ms against 11.4 ms) is congestion, not loss: an ACK for a copy sent
  before its packet timed out shows the timeout was spurious (RFC 3522's test, by the echoed
  send time) and cuts the window, once per RTT; a timer counts from the last ACK on its EV
  too; and while the peer has answered nothing since a packet was sent, one resend per timer
  pass asks for the whole window (TCP resends one segment per timeout);
- only the lost packets are resent (selective repeat), never a window (that is Go-Back-N, the
  RoCEv2 baseline);
- no new PSN goes out `mpr` x 128 PSNs or more past the cumulative ACK (mrc.h's MPR: the
  range a NIC tracks).
"""
from __future__ import annotations

from typing import Final

from hostagent.protocol import wire
from hostagent.protocol.constants import MPR_UNIT
from hostagent.protocol.evs import EVSet
from hostagent.protocol.qp import Packet, QPConfig, QueuePair, nscc, us_clock
from hostagent.protocol.recovery import TailRecovery, probe_timeout, rack_wait

NO_PSN: Final = wire.NO_PSN
_URGENT: Final = wire.IMM | wire.LAST  # a data packet that completes something is ACKed at once


class MrcQP(QueuePair):
    def __init__(self, qpn: int, peer_qpn: int, buffer: memoryview, cfg: QPConfig,
                 evset: EVSet, seed: int) -> None:
        super().__init__(qpn, peer_qpn, buffer, cfg, nscc(cfg), seed)
        self.evset = evset
        self._psn_range = cfg.mpr * MPR_UNIT
        # by EV index, lists, since both are read or written for nearly every packet: the PSN
        # last sent on the EV, and when an ACK last came back for it (-1: never)
        self._last_on_ev = [NO_PSN] * evset.index_limit()
        self._heard = [-1.0] * evset.index_limit()
        self._trimmed: set[int] = set()  # PSNs whose trimmed header arrived, data not yet
        self._probe_seq = 0
        self.tail = TailRecovery()
        self._timed_out: list[tuple[int, float, str]] = []  # this timer pass's timeouts
        self._heard_any = -1.0  # when any ACK last came back
        self._silent_resend = False  # this timer pass resent a packet the peer is silent on
        self._stalled = -1.0  # the last timer pass judged a host stall

    # ---- sender: paths ----
    def _path_for_new(self, now: float) -> int:
        ev = self.evset.pick(now)
        ev.sent += 1
        self.evset.launched(ev)
        self.tail.sent(now)
        return ev.index

    def _path_for_resend(self, p: Packet, now: float) -> int:
        evset = self.evset
        evset.landed(p.ev)  # the earlier copy no longer counts where it went
        ev = evset.pick(now, avoid=p.ev)
        ev.sent += 1
        evset.launched(ev)
        self.tail.sent(now)
        return ev.index

    def _prev_on_path(self, p: Packet) -> int:
        last = self._last_on_ev
        prev = last[p.ev]
        last[p.ev] = p.psn
        return prev

    # ---- sender: loss and congestion ----
    def _receive_nack(self, h: wire.Header, now: float) -> None:
        p = self._inflight.get(h.psn)
        if p is None:
            return  # acknowledged meanwhile
        if h.flags & wire.TRIMMED:
            p.msg.stats.trims += 1
            self.evset.on_congestion(h.ev, now, trimmed=True, rtt=self.cc.srtt)
            self.cc.on_trim(now, p.length)
        if p.ev != h.ev:
            return  # this copy was already resent elsewhere
        if not h.flags & wire.TRIMMED:
            self.evset.on_loss(h.ev, now, f"PSN {h.psn} lost on this path (gap NACK)",
                               rtt=self.cc.srtt, delay_high=self._delay_high(h.ev), gap=True)
        self._resend_now(h.psn)

    def _heard_on(self, ev: int) -> float:
        return self._heard[ev]

    def _on_timeout(self, p: Packet, now: float) -> None:
        """Resend it elsewhere; but while the peer has answered nothing since it was sent,
        one resend per timer pass asks for all (TCP resends one segment per timeout): the
        others count their timeout and wait one more interval. Whether the peer is gone, its
        host stalled or its queue longer than the timeout, resending the whole window into
        it only doubles what it has to answer: measured on the simnet, a 256-packet first
        window sent into a 52 ms queue, 11.4 ms timeout, was resent 4 times over before the
        first ACK came back."""
        self._timed_out.append((p.ev, p.sent_at, f"PSN {p.psn} timed out "
                                                 f"({p.timeouts} in a row)"))
        if self._heard_any <= p.sent_at:  # (an ACK at the same instant came first)
            if self._silent_resend:
                p.clock = now
                self._arm(p, self._timeout())
                return
            self._silent_resend = True
        self._resend_now(p.psn)

    def _timeout_cut(self, p: Packet, now: float) -> None:
        """Decided for the whole timer pass in _judge_timeouts."""

    def _judge_timeouts(self, now: float) -> None:
        batch, self._timed_out = self._timed_out, []
        self._silent_resend = False
        if not batch:
            return
        cc, evset = self.cc, self.evset
        queued = {i for i, _, _ in batch if self._delay_high(i)}  # each EV excuses its own
        congestive = bool(queued) or any(
            evset.explained_by_congestion(ev, now, cc.srtt, False)
            for ev in (evset.by_index(i) for i, _, _ in batch) if ev is not None)
        stall = evset.on_timeouts(batch, now, self._timeout(), rtt=cc.srtt, queued=queued)
        if stall:
            self.counters.stalls += 1
            self._stalled = now
        if stall or congestive:
            cc.on_timeout(now, min(sent for _, sent, _ in batch))

    def _spurious_timeout(self, p: Packet, sent: float, now: float) -> None:
        """A packet's copy outlived the timeout and arrived: its path is not lossy but its
        queue is longer than the timeout, which is congestion. The window is cut (once per
        RTT, and not again for packets sent before a cut already made: nscc.py)."""
        self.cc.on_timeout(now, sent)

    def _delay_high(self, ev: int) -> bool:
        """Queueing delay above target on this EV's own RTT (the QP's as a whole before the
        EV has one). A dead path's RTT stays where it was: measured with 4 of 8 host ports
        flapping, the QP's delay rose on the ports left, the dead paths' losses were taken
        for congestion, and they were condemned 0.24 s after the ports went down."""
        e = self.evset.by_index(ev)
        if e is None or e.srtt is None:
            return self.cc.delay_high
        return self.evset.queued(ev, self.cc.base_rtt, self.cfg.target_delay)

    def _pto(self) -> float | None:
        return probe_timeout(self.cc.srtt, self.cc.rttvar, self.cfg.ack_delay, self._timeout())

    def _ack_packet(self, psn: int, now: float) -> int:
        p = self._inflight[psn]
        self.evset.landed(p.ev)
        if p.sends == 1:  # a resent packet's ACK may be for either copy: the echo says which
            self.evset.on_delivered(p.ev, p.sent_at, acked_after=now - p.sent_at)
            self.tail.delivered(p.sent_at, psn)
        return super()._ack_packet(psn, now)

    def _after_ack(self, h: wire.Header, now: float, trigger: Packet | None,
                   rtt: float) -> None:
        # An EV's RTT samples come only from the copy an ACK answers (the echo names its EV
        # and send time), and only from the first ACK of its PSN: a packet acknowledged
        # cumulatively behind a repaired hole waited for the hole, not for its path, and a
        # reordered ACK whose trigger an earlier ACK covered would count that copy twice.
        if trigger is not None:
            self.evset.on_rtt(h.ev, rtt, now, self.cfg.target_delay)
        if h.ev < len(self._heard):  # (an echo of an EV this QP never used changes nothing)
            self._heard[h.ev] = now
        self._heard_any = now
        # the copy that triggered it was sent at or after this (the echo is in whole us)
        sent = now - rtt - 1e-6
        self.evset.on_delivered(h.ev, sent, packet=False)
        self.tail.delivered(sent, h.imm)
        self.tail.heard(now)
        self._rack(now)

    def _rack(self, now: float) -> None:
        """Packets RACK finds lost: resent now, each judged like a gap on its EV."""
        cc = self.cc
        timeout = self._timeout()
        wait = rack_wait(cc.srtt, cc.rttvar, self.cfg.ack_delay, timeout)
        if wait is None or not self._inflight:
            self.tail.deadline = None
            return
        # RACK can only find lost a packet sent before the newest delivered one, by (send time,
        # PSN): those sent earlier are the first few in the order of sending (qp.py), those
        # sent at the same moment have a lower PSN. Taken in PSN order, as the window holds them.
        inflight, tail = self._inflight, self.tail
        newest, newest_psn = tail.rack_sent, tail.rack_psn
        before = []
        for psn in self._send_order:
            if inflight[psn].sent_at >= newest:
                break
            before.append(psn)
        for psn, p in inflight.items():
            if psn >= newest_psn:
                break
            if p.sent_at == newest:
                before.append(psn)
        # Per EV: a path with a queue waits by its own RTT; one with no RTT sample yet (no ACK
        # answered a copy on it) by how long its last packet took to be acknowledged, at least
        # its RTT; one with nothing acknowledged yet, for the ACK timeout.
        waits: dict[int, float] = {}
        if before:
            before.sort()
            for ev in self.evset.evs:
                own = (rack_wait(ev.srtt, ev.rttvar, self.cfg.ack_delay, timeout)
                       if ev.srtt is not None else
                       rack_wait(ev.acked_after, 0.0, self.cfg.ack_delay, timeout))
                waits[ev.index] = timeout if own is None else max(wait, own)
        queued = set(self._resend)
        outstanding = ((psn, inflight[psn].sent_at, waits.get(inflight[psn].ev, wait))
                       for psn in before if psn not in queued)
        lost = []
        for psn in self.tail.lost(outstanding, now):
            p = self._inflight[psn]
            self.counters.rack_losses += 1
            self._resend_now(psn)
            if p.sent_at <= self._stalled:
                continue  # lost to the stall (held back while the peer was silent: _on_timeout)
            lost.append((p.ev, p.sent_at, f"PSN {psn} lost (a later packet arrived, RACK)",
                         self._delay_high(p.ev)))
        if lost:
            self.evset.on_losses_found(lost, now, rtt=cc.srtt, queued=cc.delay_high)

    def _on_path_feedback(self, ev: int, now: float, ecn: bool) -> None:
        self.evset.on_feedback(ev, ecn)
        if ecn:
            self.evset.on_congestion(ev, now, trimmed=False, rtt=self.cc.srtt)

    # ---- receiver ----
    def _receive_data(self, h: wire.Header, payload: memoryview, now: float,
                      ecn: bool) -> None:
        psn, cum, got = h.psn, self._cum, self._got
        if h.flags & wire.TRIMMED or len(payload) < h.length:
            self.counters.trims_received += 1
            if psn >= cum and psn not in got:
                self._trimmed.add(psn)
                self._control(wire.NACK, wire.TRIMMED, h.ev, psn, ts=h.ts)
                self.counters.nacks_sent += 1
            return
        if len(payload) != h.length or wire.crc32(payload) != h.crc:  # wire.payload_ok
            self.counters.corrupt += 1
            return
        if psn < cum or psn in got:
            self.counters.duplicates += 1
            self._owe_ack(h, now, ecn, urgent=True)  # the sender missed our ACK
            return
        # `prev` names the copy sent before this one on its EV: only this transmission names
        # that copy (a duplicate of it stopped above), so each lost copy of a PSN, a resend
        # too, is NACKed once. A PSN resent on the EV it was last sent on names itself.
        prev = h.aux
        if (prev != NO_PSN and prev != psn and prev >= cum and prev not in got
                and prev not in self._trimmed):
            self._control(wire.NACK, wire.GAP, h.ev, prev, ts=h.ts)
            self.counters.nacks_sent += 1
        if psn != cum:
            self.counters.out_of_order += 1
        self._place(h, payload)
        self._landed(psn)
        if self._trimmed:  # empty but for trims not yet resent: skip the lookups then
            self._trimmed.discard(psn)
        self._owe_ack(h, now, ecn, urgent=bool(h.flags & _URGENT))

    # ---- probes of ASSUMED_BAD EVs ----
    def _receive_probe(self, h: wire.Header, now: float) -> None:
        if h.type == wire.PROBE:
            self._control(wire.PROBE_REPLY, 0, h.ev, h.psn, ts=h.ts)
        elif self.evset.on_probe_reply(h.ev, h.psn, now) is not None:
            self.counters.probe_replies += 1

    def _extra_deadline(self) -> float | None:
        probe = self.evset.next_probe_time()
        tail = self.tail.next_time(self._pto(), bool(self._inflight))
        if probe is None or tail is None:
            return tail if probe is None else probe
        return min(probe, tail)

    def _extra_timers(self, now: float) -> None:
        self._judge_timeouts(now)
        for ev in self.evset.probes_due(now):
            self._probe_seq += 1
            self.evset.probe_sent(ev, self._probe_seq, now)
            self.counters.probes_sent += 1
            self._control(wire.PROBE, 0, ev, self._probe_seq, ts=us_clock(now))
        if self.tail.deadline is not None and self.tail.deadline <= now:
            self._rack(now)
        pto = self._pto()
        if pto is not None and self.tail.probe_due(now, pto, bool(self._inflight)):
            newest = max(self._inflight)  # its ACK's SACK shows the holes (RACK)
            self.counters.tail_probes += 1
            self._resend_now(newest)
