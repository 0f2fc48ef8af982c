"""The RoCEv2 baseline: one path per QP, in-order delivery, Go-Back-N ("lossy RoCE": no PFC).

Fair to MRC where the two mean the same thing: the same packet size and window cap, and the
retransmission machinery of qp.py; the ACK timeout and retry schedule are each specification's
(below). What differs is what RoCEv2 does, as an RC QP on an RNIC does it:
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
  something new). A NAK (sequence error) acknowledges every PSN below the one it names and
  goes back to that one; it counts as a retry too, unless a retry is already under way since
  the last ACK (rxe_comp.c: check_ack's "a nak implicitly acks all packets with psns before",
  then COMPST_ERROR_RETRY, which decrements retry_cnt once per retry sequence: `started_retry`,
  cleared by an ACK only). Its implicit acknowledgement does not reset the count;
- a CNP is not an ACK: it never starts the timer over (an RNIC's CNP reaches its congestion
  control only). Here a CNP is an ACK with the ECN flag, so one that acknowledges nothing new
  is taken for a CNP alone; one that does is the ACK a real NIC would also have sent;
  Restarting only on ACKs that acknowledge something new is not enough: behind a queue
  longer than the timeout, the copies a timeout resent arrive as duplicates, whose ACKs are
  no progress, and their wait makes the timer expire again (measured on the simnet, one QP
  behind a 20 ms queue, 10 ms timeout: 44 timeouts and 2.0 s against 2 and 0.43 s);
- congestion control is DCQCN (dcqcn.py), its CNP spacing and timers ratios to the path's base
  RTT (`QPConfig.base_rtt`; the ratios are the scenario's `dcqcn`); timeouts get no rate
  reaction beyond Go-Back-N.
The ACK timeout is 4.096 us x 2^timeout (the scenario's `timeout_exp`), with `retry_cnt`
retries at that fixed interval (NCCL's defaults, 2^20 and 7, in the real frame; qp.py runs it as
linear_cnt = retry_cnt, exp_cnt 0). What a real RNIC does differently: the timeout here is at
least srtt + 4 rttvar (the emulated hosts' scheduling delay is milliseconds); without
fabric.real_rate the scenario's default schedule is MRC's (linear then doubling); a CE-marked
duplicate's ACK counts as a CNP alone (a real responder sends the ACK and a CNP apart).
A NIC with one port per plane runs at least one QP per port: the agent puts QP k toward a peer
on plane k mod planes, and the scenario's default is one QP per plane (testbed/scenario).
"""
from __future__ import annotations

from typing import Any, Final

from hostagent.protocol import wire
from hostagent.protocol.dcqcn import DcqcnCC, DcqcnConfig
from hostagent.protocol.qp import (
    Packet,
    QPConfig,
    QPFailed,
    QueuePair,
    retries_exhausted,
    time_to_fail,
)

PATH: Final = 0  # the single path: what it is, the fabric's ECMP decides
UNLIMITED_RATE: Final = 100e9  # bit/s where no line rate is given (unit tests): never the limit
MAX_RETRY_CNT: Final = 7  # an RC QP's retry_cnt is 3 bits (ibv_qp_attr.retry_cnt)
NCCL_IB_TIMEOUT: Final = 20  # NCCL's NCCL_IB_TIMEOUT default (src/transport/net_ib: 14, then 18)
NCCL_IB_RETRY_CNT: Final = 7  # NCCL's NCCL_IB_RETRY_CNT default


class NoBaseRtt(ValueError):
    """A RoCEv2 QP built without its path's base RTT: its DCQCN would have no time scale."""


def dcqcn(cfg: QPConfig, **settings: Any) -> DcqcnCC:
    """The baseline's rate control, its spacing and timers ratios to the path's base RTT
    (`settings`: DcqcnConfig.for_path's, the testbed's DCQCN settings). Without a base RTT
    the timers would be the microsecond values of a 10 us fabric, milliseconds of CPU wake-ups
    short of any emulated RTT: DCQCN would be inert, so that is an error."""
    if cfg.base_rtt is None or cfg.base_rtt <= 0:
        raise NoBaseRtt("a RoCEv2 QP needs its path's base RTT (QPConfig.base_rtt, s): "
                        "DCQCN's spacing and timers are ratios to it")
    return DcqcnCC(DcqcnConfig.for_path(cfg.mss, cfg.max_cwnd, cfg.line_rate or UNLIMITED_RATE,
                                        cfg.base_rtt, **settings))


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
        self._retry_epoch = -1  # the progress count when a retry sequence last started

    def _path_for_new(self, now: float) -> int:
        return PATH

    def _path_for_resend(self, p: Packet, now: float) -> int:
        return PATH

    def _go_back(self, psn: int) -> None:
        """Resend every outstanding packet from `psn` on, in order."""
        self._resend.clear()
        self._resend.extend(sorted(q for q in self._inflight if q >= psn))

    def _receive_nack(self, h: wire.Header, now: float) -> None:
        """A NAK: the PSNs below `h.psn` arrived, and a retry from it starts (see the module)."""
        self._timer_from = now
        for psn in [q for q in self._inflight if q < h.psn]:
            self._ack_packet(psn, now)
        self._lowest_unacked = max(self._lowest_unacked, h.psn)
        p = self._inflight.get(h.psn)
        if p is None:
            return
        if self._retry_epoch != self._progress:
            self._retry_epoch = self._progress
            if p.epoch != self._progress:
                p.timeouts, p.epoch = 0, self._progress
            p.timeouts += 1
            for q in self._inflight.values():
                q.timeouts, q.epoch = p.timeouts, p.epoch
            if retries_exhausted(self.cfg, p.timeouts):
                self._fail(QPFailed(f"PSN {h.psn} NAKed with its retries used up ({p.timeouts} "
                                    f"retries in a row)", now, p.timeouts,
                                    time_to_fail(self.cfg, self._timeout())))
                return
        self._go_back(h.psn)

    def _heard_on(self, ev: int) -> float:
        return self._timer_from

    def _receive_ack(self, h: wire.Header, now: float) -> None:
        """An ACK starts the timer over; a CNP alone (an ECN-flagged ACK acknowledging
        nothing new) does not."""
        before = self._progress
        super()._receive_ack(h, now)
        if not h.flags & wire.ECN or self._progress != before:
            self._timer_from = now

    def _on_timeout(self, p: Packet, now: float) -> None:
        """The QP's timer: every outstanding packet carries the QP's retry count from here
        (a packet resent by Go-Back-N is not new: its timeout is the QP's next retry)."""
        for q in self._inflight.values():
            q.timeouts, q.epoch = p.timeouts, p.epoch
        self._timer_from = now
        self._retry_epoch = self._progress
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
