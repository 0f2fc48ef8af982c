"""MRC: one QP sprays every packet over all its GOOD EVs and recovers each loss on its own.

What this class adds to the shared QP machinery (qp.py):
- the path of every packet is an EV chosen by the EV set (evs.py): round robin or random over
  the active GOOD EVs, skipping congested ones for a moment;
- the receiver places packets wherever they land (out of order) and acknowledges with a
  cumulative PSN plus a 64-bit SACK bitmap;
- a trimmed packet (header only) is NACKed at once as TRIMMED: a congestion signal; the sender
  resends it on another EV, takes its bytes off the window (cc.py), and holds that EV off;
- every data packet names the PSN sent before it on the same EV. Full packets on one path stay
  in order, so when that earlier PSN never arrived (and was not trimmed) it was lost on that
  path: the receiver NACKs it at once as GAP, and the sender resends it elsewhere. (The spec
  names MRC_DEVICE_CAP_TRIM_NACK but publishes no wire format: this per-EV gap NACK is our
  own policy.);
- a GAP or a retransmission timeout is a loss on that EV: unless congestion explains it
  (recent marks or trims on the EV, or queueing delay above target), the EV goes ASSUMED_BAD
  (evs.py); ASSUMED_BAD EVs are probed, each probe matched to its reply, and come back after
  a run of answered probes;
- NACK- and trim-driven resends are not timeouts: only timeouts count towards the retry
  schedule (qp.py);
- only the lost packets are resent (selective repeat), never a window (that is Go-Back-N, the
  RoCEv2 baseline).
"""
from __future__ import annotations

from zlib import crc32 as _crc32

from . import wire
from .evs import EVSet
from .qp import Packet, QPConfig, QueuePair, nscc, us_clock

NO_PSN = wire.NO_PSN
_URGENT = wire.IMM | wire.LAST  # a data packet that completes something is ACKed at once


class MrcQP(QueuePair):
    def __init__(self, qpn: int, peer_qpn: int, buffer: memoryview, cfg: QPConfig,
                 evset: EVSet, seed: int) -> None:
        super().__init__(qpn, peer_qpn, buffer, cfg, nscc(cfg), seed)
        self.evset = evset
        self._last_on_ev: dict[int, int] = {}
        self._trimmed: set[int] = set()  # PSNs whose trimmed header arrived, data not yet
        self._nacked: set[int] = set()  # PSNs already NACKed as GAP
        self._probe_seq = 0

    # ---- sender: paths ----
    def _path_for_new(self, now: float) -> int:
        ev = self.evset.pick(now)
        ev.sent += 1
        return ev.index

    def _path_for_resend(self, p: Packet, now: float) -> int:
        ev = self.evset.pick(now, avoid=p.ev)
        ev.sent += 1
        return ev.index

    def _prev_on_path(self, p: Packet) -> int:
        prev = self._last_on_ev.get(p.ev, wire.NO_PSN)
        self._last_on_ev[p.ev] = p.psn
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
                               rtt=self.cc.srtt, delay_high=self.cc.delay_high, gap=True)
        self._resend_now(h.psn)

    def _on_timeout(self, p: Packet, now: float) -> None:
        self.evset.on_loss(p.ev, now, f"PSN {p.psn} timed out ({p.timeouts} in a row)",
                           rtt=self.cc.srtt, delay_high=self.cc.delay_high)
        self._resend_now(p.psn)

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
        if len(payload) != h.length or _crc32(payload) != h.crc:  # wire.payload_ok
            self.counters.corrupt += 1
            return
        if psn < cum or psn in got:
            self.counters.duplicates += 1
            self._owe_ack(h, now, ecn, urgent=True)  # the sender missed our ACK
            return
        prev = h.aux
        if (prev != NO_PSN and prev >= cum and prev not in got
                and prev not in self._trimmed and prev not in self._nacked):
            self._nacked.add(prev)
            self._control(wire.NACK, wire.GAP, h.ev, prev, ts=h.ts)
            self.counters.nacks_sent += 1
        if psn != cum:
            self.counters.out_of_order += 1
        self._place(h, payload)
        self._landed(psn)
        if self._trimmed:  # empty but for trims not yet resent: skip the lookups then
            self._trimmed.discard(psn)
        if self._nacked:
            self._nacked.discard(psn)
        self._owe_ack(h, now, ecn, urgent=bool(h.flags & _URGENT))

    # ---- probes of ASSUMED_BAD EVs ----
    def _receive_probe(self, h: wire.Header, now: float) -> None:
        if h.type == wire.PROBE:
            self._control(wire.PROBE_REPLY, 0, h.ev, h.psn, ts=h.ts)
        elif self.evset.on_probe_reply(h.ev, h.psn, now) is not None:
            self.counters.probe_replies += 1

    def _extra_deadline(self) -> float | None:
        return self.evset.next_probe_time()

    def _extra_timers(self, now: float) -> None:
        for ev in self.evset.probes_due(now):
            self._probe_seq += 1
            self.evset.probe_sent(ev, self._probe_seq, now)
            self.counters.probes_sent += 1
            self._control(wire.PROBE, 0, ev, self._probe_seq, ts=us_clock(now))
