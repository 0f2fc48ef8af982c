"""The RoCEv2 baseline: one path per QP, in-order delivery, Go-Back-N.

Fair to MRC where the two mean the same thing: the same packet size, window limits,
retransmission timer, backoff and retry budget (qp.py). What differs is what RoCEv2 does:
- every packet of the QP takes the one path the fabric's ECMP hash gives its 5-tuple (the IO
  layer sends to the peer's plain address with a UDP source port fixed per QP: its entropy);
- the receiver accepts only the next expected PSN; anything later is dropped and answered by
  one NACK (sequence error) per gap; a trimmed packet is just a damaged packet, dropped;
- on a NACK or a timeout the sender goes back and resends everything from the missing PSN;
- congestion control reacts to ECN only (delay and trims off), like DCQCN's cuts.
"""
from __future__ import annotations

from . import wire
from .qp import QPConfig, QueuePair, _Packet, window

PATH = 0  # the single path: what it is, the fabric's ECMP decides


class RoceQP(QueuePair):
    def __init__(self, qpn: int, peer_qpn: int, buffer: memoryview, cfg: QPConfig,
                 seed: int) -> None:
        super().__init__(qpn, peer_qpn, buffer, cfg,
                         window(cfg, react_to_delay=False, react_to_trim=False), seed)
        self._nak_for: int | None = None  # the expected PSN we already NACKed

    def _path_for_new(self, now: float) -> int:
        return PATH

    def _path_for_resend(self, p: _Packet, now: float) -> int:
        return PATH

    def _go_back(self, psn: int) -> None:
        """Resend every outstanding packet from `psn` on, in order."""
        self._resend.clear()
        self._resend.extend(sorted(q for q in self._inflight if q >= psn))

    def _receive_nack(self, h: wire.Header, now: float) -> None:
        if h.psn in self._inflight:
            self._go_back(h.psn)

    def _on_timeout(self, p: _Packet, now: float) -> None:
        self._go_back(min(self._inflight))

    def _receive_data(self, h: wire.Header, payload: memoryview, now: float,
                      ecn: bool) -> None:
        if h.trimmed or not wire.payload_ok(h, payload):
            self.counters["corrupt"] += 1
            return
        if h.psn < self._cum:
            self.counters["duplicates"] += 1
            self._owe_ack(h, now, ecn, urgent=True)
            return
        if h.psn > self._cum:
            self.counters["dropped_out_of_order"] += 1
            if self._nak_for != self._cum:
                self._nak_for = self._cum
                self._control(wire.NACK, wire.GAP, PATH, self._cum, ts=h.ts)
                self.counters["nacks_sent"] += 1
            return
        self._place(h, payload)
        self._landed(h.psn)
        self._owe_ack(h, now, ecn, urgent=bool(h.flags & (wire.IMM | wire.LAST)))
