"""Window-based congestion control in the spirit of UET's NSCC (from SMaRTT).

NSCC reads two signals per ACK, queueing delay against a target and ECN, and acts on the
quadrant they fall in:
- low delay, no ECN: increase (additively, plus proportionally to the delay headroom);
- high delay, ECN: decrease multiplicatively, in proportion to how far delay exceeds the
  target, at most once per RTT;
- low delay, ECN: hold (a transient mark; spraying already moved the next packets away);
- high delay, no ECN: NSCC increases slowly there, trusting ECN to flag a standing queue. Here,
  past twice the target, it decreases like the ECN case: a fabric without ECN marking (or with
  it turned off to compare) would otherwise let the window fill every buffer. (Below twice
  the target it holds: emulated hosts share two cores, and their scheduling jitter looks like
  a little queueing delay.)
A trim counts as high delay with ECN; a retransmission timeout halves the window.

Simplified here: one window per QP in bytes (NSCC also paces), delay measured as RTT minus the
smallest RTT seen (no NIC timestamps), and the constants below instead of NSCC's tuned
derivations from link speed and topology. The RoCEv2 baseline uses the same class with delay and
trim reactions off: ECN-driven decrease and additive increase, close to DCQCN's behaviour
expressed as a window.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CCConfig:
    mss: int
    init_cwnd: int  # bytes
    max_cwnd: int  # bytes
    target_delay: float = 0.002  # seconds of queueing above the base RTT
    additive: float = 1.0  # MSS added per window of ACKed bytes
    proportional: float = 0.5  # extra increase scaled by the delay headroom
    max_decrease: float = 0.5  # at most halve per RTT
    react_to_delay: bool = True
    react_to_trim: bool = True


class WindowCC:
    def __init__(self, cfg: CCConfig) -> None:
        self.cfg = cfg
        self.cwnd = float(cfg.init_cwnd)
        self.base_rtt: float | None = None
        self.srtt: float | None = None
        self.rttvar = 0.0
        self._last_decrease = -1.0
        self.decreases = 0

    @property
    def min_cwnd(self) -> float:
        return float(self.cfg.mss)

    def allows(self, inflight: int, size: int) -> bool:
        return inflight + size <= max(self.cwnd, self.min_cwnd) or inflight == 0

    def _rtt_sample(self, rtt: float) -> None:
        self.base_rtt = rtt if self.base_rtt is None else min(self.base_rtt, rtt)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt

    def _decrease(self, now: float, factor: float) -> None:
        rtt = self.srtt or 0.0
        if now - self._last_decrease < rtt:
            return  # once per RTT: the marks of one congestion event arrive together
        self._last_decrease = now
        self.decreases += 1
        self.cwnd = max(self.min_cwnd, self.cwnd * (1 - min(factor, self.cfg.max_decrease)))

    def on_ack(self, now: float, acked: int, rtt: float | None, ecn: bool) -> None:
        cfg = self.cfg
        delay = 0.0
        if rtt is not None:
            self._rtt_sample(rtt)
            delay = rtt - (self.base_rtt or rtt)
        high = cfg.react_to_delay and delay > cfg.target_delay
        if high and (ecn or delay > 2 * cfg.target_delay):
            excess = (delay - cfg.target_delay) / max(delay, 1e-9)
            self._decrease(now, max(excess, 0.25 if ecn else 0.05))
        elif high or (ecn and cfg.react_to_delay):
            return  # a little delay, or ECN at low delay: hold
        elif ecn:
            self._decrease(now, 0.5)  # the baseline: ECN alone cuts, as DCQCN does
        else:
            step = cfg.additive * cfg.mss * acked / max(self.cwnd, cfg.mss)
            if cfg.react_to_delay and cfg.target_delay > 0:
                step *= 1 + cfg.proportional * (1 - delay / cfg.target_delay)
            self.cwnd = min(float(cfg.max_cwnd), self.cwnd + step)

    def on_trim(self, now: float) -> None:
        if self.cfg.react_to_trim:
            self._decrease(now, 0.25)

    def on_timeout(self, now: float) -> None:
        self._last_decrease = now
        self.decreases += 1
        self.cwnd = max(self.min_cwnd, self.cwnd / 2)
