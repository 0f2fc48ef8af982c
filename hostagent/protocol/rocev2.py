"""The RoCEv2 baseline: one path per QP, in-order delivery, Go-Back-N ("lossy RoCE": no PFC).

Fair to MRC where the two mean the same thing: the same packet size, window cap, ACK timeout
and retry schedule (qp.py). What differs is what RoCEv2 does, as an RC QP on an RNIC does it:
- every packet of the QP takes the one path the fabric's ECMP hash gives its 5-tuple (the IO
  layer sends to the peer's plain address with a UDP source port fixed per QP: its entropy);
- the receiver accepts only the next expected PSN; anything later is dropped and answered by
  one NACK (sequence error) per gap; a trimmed packet is just a damaged packet, dropped;
- the receiver is DCQCN's notification point: a CE-marked data packet, whatever its PSN (in
  order, duplicate, or dropped out of order), makes it send a CNP, at most one per QP per
  `cnp_interval`; the CNP is an ACK of the cumulative PSN with the ECN flag (the testbed's
  control header: a real NIC sends a separate CNP packet);
- the requester keeps one retransmit timer per QP, started over by every ACK or NACK while
  PSNs are outstanding, as Linux's soft-RoCE completer does (drivers/infiniband/sw/rxe/
  rxe_comp.c: `mod_timer(&qp->retrans_timer, ...)` once it has handled a response): every
  packet's timer counts from its send or from the QP's last response, whichever is later, so
  the first to expire is the QP's. On expiry: Go-Back-N from the oldest unacknowledged PSN,
  the timer starts over, and the QP's retry count goes up (it resets when an ACK acknowledges
  something new: the spec's schedule, qp.py); a NACK goes back without counting a retry.
  Restarting only on ACKs that acknowledge something new is not enough: behind a queue
  longer than the timeout, the copies a timeout resent arrive as duplicates, whose ACKs are
  no progress, and their wait makes the timer expire again (measured on the simnet, one QP
  behind a 20 ms queue, 10 ms timeout: 44 timeouts and 2.0 s against 2 and 0.43 s);
- congestion control is DCQCN (dcqcn.py), its CNP spacing and timers ratios to the path's base
  RTT (`QPConfig.base_rtt`; the ratios are the scenario's `dcqcn`); timeouts get no rate
  reaction beyond Go-Back-N.
What a real RNIC does differently: its ACK timeout is a fixed 4.096 us x 2^timeout with a
constant retry interval (here the spec's schedule, shared with MRC, and at least srtt + 4
rttvar, since the emulated hosts' scheduling delay is milliseconds); a real CNP reaches the
congestion control only, here it is an ACK and starts the timer over too (it answers a packet
that arrived: the peer is alive).
A NIC with one port per plane runs at least one QP per port: the agent puts QP k toward a peer
on plane k mod planes, and the scenario's default is one QP per plane (testbed/scenario).
"""
from __future__ import annotations

from typing import Final

from hostagent.protocol import wire
from hostagent.protocol.dcqcn import REFERENCE_RTT, DcqcnCC, DcqcnConfig
from hostagent.protocol.qp import Packet, QPConfig, QueuePair

PATH: Final = 0  # the single path: what it is, the fabric's ECMP decides
UNLIMITED_RATE: Final = 100e9  # bit/s where no line rate is given (unit tests): never the limit


def dcqcn(cfg: QPConfig, **ratios: float) -> DcqcnCC:
    """The baseline's rate control, its spacing and timers ratios to the path's base RTT
    (`ratios`: DcqcnConfig.for_path's cnp_rtts and timer_rtts, the scenario's `dcqcn`)."""
    return DcqcnCC(DcqcnConfig.for_path(cfg.mss, cfg.max_cwnd, cfg.line_rate or UNLIMITED_RATE,
                                        cfg.base_rtt or REFERENCE_RTT, **ratios))


class RoceQP(QueuePair):
    """`cc`: the QP's DCQCN (`dcqcn` with the scenario's ratios); default: `dcqcn(cfg)`."""

    karn = True  # a RoCEv2 ACK (AETH) cannot say which copy of a resent packet it answers

    def __init__(self, qpn: int, peer_qpn: int, buffer: memoryview, cfg: QPConfig,
                 seed: int, cc: DcqcnCC | None = None) -> None:
        cc = cc or dcqcn(cfg)
        super().__init__(qpn, peer_qpn, buffer, cfg, cc, seed)
        self._cnp_interval = cc.cfg.cnp_interval
        self._nak_for: int | None = None  # the expected PSN we already NACKed
        self._timer_from = -1.0  # when the QP's timer last started over: an ACK, or its expiry
        self._last_cnp = -1.0  # when this QP's notification point last sent a CNP

    def _path_for_new(self, now: float) -> int:
        return PATH

    def _path_for_resend(self, p: Packet, now: float) -> int:
        return PATH

    def _go_back(self, psn: int) -> None:
        """Resend every outstanding packet from `psn` on, in order."""
        self._resend.clear()
        self._resend.extend(sorted(q for q in self._inflight if q >= psn))

    def _receive_nack(self, h: wire.Header, now: float) -> None:
        self._timer_from = now
        if h.psn in self._inflight:
            self._go_back(h.psn)

    def _heard_on(self, ev: int) -> float:
        return self._timer_from

    def _after_ack(self, h: wire.Header, now: float, trigger: Packet | None,
                   rtt: float) -> None:
        self._timer_from = now

    def _on_timeout(self, p: Packet, now: float) -> None:
        """The QP's timer: every outstanding packet carries the QP's retry count from here
        (a packet resent by Go-Back-N is not new: its timeout is the QP's next retry)."""
        for q in self._inflight.values():
            q.timeouts, q.epoch = p.timeouts, p.epoch
        self._timer_from = now
        self._go_back(min(self._inflight))

    def _cnp_due(self, now: float) -> bool:
        """The notification point's spacing: whether a CE mark arriving now sends a CNP."""
        if self._last_cnp >= 0 and now - self._last_cnp < self._cnp_interval:
            return False
        self._last_cnp = now
        self.counters.cnps_sent += 1
        return True

    def _receive_data(self, h: wire.Header, payload: memoryview, now: float,
                      ecn: bool) -> None:
        if h.trimmed or not wire.payload_ok(h, payload):
            self.counters.corrupt += 1
            return
        cnp = ecn and self._cnp_due(now)
        if h.psn < self._cum:
            self.counters.duplicates += 1
            self._owe_ack(h, now, cnp, urgent=True)
            return
        if h.psn > self._cum:
            self.counters.dropped_out_of_order += 1
            if self._nak_for != self._cum:
                self._nak_for = self._cum
                self._control(wire.NACK, wire.GAP, PATH, self._cum, ts=h.ts)
                self.counters.nacks_sent += 1
            if cnp:
                self._owe_ack(h, now, True, urgent=True)
            return
        self._place(h, payload)
        self._landed(h.psn)
        self._owe_ack(h, now, cnp, urgent=bool(h.flags & (wire.IMM | wire.LAST)))
