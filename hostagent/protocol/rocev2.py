"""The RoCEv2 baseline: one path per QP, in-order delivery, Go-Back-N.

Fair to MRC where the two mean the same thing: the same packet size, window cap, ACK timeout
and retry schedule (qp.py). What differs is what RoCEv2 does:
- every packet of the QP takes the one path the fabric's ECMP hash gives its 5-tuple (the IO
  layer sends to the peer's plain address with a UDP source port fixed per QP: its entropy);
- the receiver accepts only the next expected PSN; anything later is dropped and answered by
  one NACK (sequence error) per gap; a trimmed packet is just a damaged packet, dropped;
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
- congestion control is DCQCN-like rate control (dcqcn.py): ECN-marked ACKs cut the rate,
  timers and a byte counter bring it back; timeouts get no reaction beyond Go-Back-N.
A NIC with one port per plane runs at least one QP per port: the agent puts QP k toward a peer
on plane k mod planes, and the scenario's default is one QP per plane (testbed/scenario.py).
"""
from __future__ import annotations

from hostagent.protocol import wire
from hostagent.protocol.dcqcn import DcqcnCC, DcqcnConfig
from hostagent.protocol.qp import Packet, QPConfig, QueuePair

PATH = 0  # the single path: what it is, the fabric's ECMP decides
UNLIMITED_RATE = 100e9  # bit/s where no line rate is given (unit tests): never the limit


def dcqcn(cfg: QPConfig) -> DcqcnCC:
    """The baseline's rate control, its timers scaled to the fabric's target delay."""
    return DcqcnCC(DcqcnConfig(cfg.mss, cfg.max_cwnd, cfg.line_rate or UNLIMITED_RATE,
                               period=cfg.target_delay, cnp_interval=cfg.target_delay / 4))


class RoceQP(QueuePair):
    karn = True  # a RoCEv2 ACK (AETH) cannot say which copy of a resent packet it answers

    def __init__(self, qpn: int, peer_qpn: int, buffer: memoryview, cfg: QPConfig,
                 seed: int) -> None:
        super().__init__(qpn, peer_qpn, buffer, cfg, dcqcn(cfg), seed)
        self._nak_for: int | None = None  # the expected PSN we already NACKed
        self._timer_from = -1.0  # when the QP's timer last started over: an ACK, or its expiry

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

    def _receive_data(self, h: wire.Header, payload: memoryview, now: float,
                      ecn: bool) -> None:
        if h.trimmed or not wire.payload_ok(h, payload):
            self.counters.corrupt += 1
            return
        if h.psn < self._cum:
            self.counters.duplicates += 1
            self._owe_ack(h, now, ecn, urgent=True)
            return
        if h.psn > self._cum:
            self.counters.dropped_out_of_order += 1
            if self._nak_for != self._cum:
                self._nak_for = self._cum
                self._control(wire.NACK, wire.GAP, PATH, self._cum, ts=h.ts)
                self.counters.nacks_sent += 1
            return
        self._place(h, payload)
        self._landed(h.psn)
        self._owe_ack(h, now, ecn, urgent=bool(h.flags & (wire.IMM | wire.LAST)))
