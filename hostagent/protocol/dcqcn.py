"""The RoCEv2 baseline's congestion control: DCQCN-like rate control (Zhu et al., SIGCOMM 2015).

Beside NSCC (nscc.py), which is a window driven by delay, ECN and trims, the baseline's NIC runs
the control RoCEv2 deployments use: a *rate*, driven by congestion notifications only.

- The receiver echoes a CE mark in its ACK (our stand-in for a CNP). On a notification, at
  most one per `cnp_interval` (the NP's 50 us CNP spacing, scaled): the current rate drops by
  alpha/2 and alpha moves towards 1 by `g`. The target rate takes the current rate (before
  the cut) only if the rate has increased since the last cut: NVIDIA's firmware default
  (`clamp_tgt_rate` 0, `clamp_tgt_rate_after_time_inc` 1). The paper sets the target at every
  notification; then a run of cuts in a row, each before the previous one has drained the
  queue, leaves the target at the lowest rate but one and recovery crawls at additive
  increase (measured on quickstart: see the README, "The transports").
- Every `period` without a notification, alpha decays by (1 - g).
- Every `period` (the rate-increase timer) or every `byte_counter` bytes sent (the byte
  counter), the rate increases: the first `fast_recovery` steps halve the distance to the
  target rate (fast recovery), then the target grows by `rate_ai` (additive increase), after
  `fast_recovery` more steps by `rate_hai` per step (hyper increase); the current rate moves
  halfway to the target each time.
- Timeouts and NACKs: no rate reaction. Go-Back-N resends (rocev2.py) are the reaction.
Packets leave no faster than the current rate, in bursts of at most `burst` packets (the QP
waits for `next_send_time`); the window
(`max_cwnd`) only caps what is in flight, as a NIC caps outstanding work requests.

Scaled to this fabric: DCQCN's timers (55 us) and CNP spacing (50 us) are tuned to
microsecond RTTs; here they are multiples of the fabric's target delay, since the emulated
RTTs are milliseconds. `g` is 1/16 rather than 1/256 for the same reason: there are far fewer
marks per second to average over.
"""
from __future__ import annotations

from dataclasses import dataclass

from hostagent.protocol import nic, wire
from hostagent.protocol.nscc import smoothed

PACING_SLACK = 1e-9  # s: float rounding must not cost a burst its last packet


@dataclass
class DcqcnConfig:
    mss: int
    max_cwnd: int  # bytes in flight at most
    line_rate: float  # bit/s: the port's rate, where a QP starts
    period: float = 0.002  # s: alpha update and rate-increase timer
    cnp_interval: float = 0.0005  # s: at most one reaction per interval
    g: float = 1 / 16
    byte_counter: int = 64 * 1024  # bytes sent between byte-counter increase steps
    fast_recovery: int = 5  # steps of fast recovery before additive increase
    rate_ai: float = 0.02  # additive increase, share of line rate per step
    rate_hai: float = 0.1  # hyper increase, share of line rate per step
    min_rate: float = 0.01  # share of line rate the rate never falls below
    burst: int = 4  # packets that may leave back to back (a NIC's pacing granularity), >= 1


class DcqcnCC:
    def __init__(self, cfg: DcqcnConfig) -> None:
        self.cfg = cfg
        self.rate = cfg.line_rate  # bit/s, current
        self.target = cfg.line_rate
        self.alpha = 1.0
        self.decreases = 0  # rate cuts (one per notification acted on)
        self.cnps = 0  # CE-echoing ACKs received: the notifications
        self.base_rtt: float | None = None
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.delay_high = False  # no delay signal in DCQCN
        self._next_send = 0.0
        self._last_cnp = -1.0
        self._alpha_at: float | None = None  # next alpha update
        self._increase_at: float | None = None
        self._bytes = 0
        self._timer_steps = 0
        self._byte_steps = 0

    @property
    def cwnd(self) -> float:
        """Bytes the rate moves in one smoothed RTT (reported beside NSCC's window)."""
        return self.rate / 8 * (self.srtt or 0.0)

    def allows(self, inflight: int, size: int, now: float = 0.0) -> bool:
        self._timers(now)
        if inflight and inflight + size > self.cfg.max_cwnd:
            return False
        return now >= self.next_send_time() - PACING_SLACK

    def _burst_time(self) -> float:
        packet = self.cfg.mss + wire.HEADER_SIZE + nic.FRAME_OVERHEAD
        return (self.cfg.burst - 1) * packet * 8 / self.rate

    def next_send_time(self) -> float:
        return self._next_send - self._burst_time()

    def on_send(self, now: float, wire_bytes: int) -> None:
        self._next_send = max(self._next_send, now) + wire_bytes * 8 / self.rate
        self._bytes += wire_bytes
        if self._bytes >= self.cfg.byte_counter:
            self._bytes = 0
            self._byte_steps += 1
            self._increase()

    def _timers(self, now: float) -> None:
        cfg = self.cfg
        if self._alpha_at is None:
            self._alpha_at = self._increase_at = now + cfg.period
        assert self._increase_at is not None  # set together with _alpha_at
        while now >= self._alpha_at:
            self.alpha *= 1 - cfg.g
            self._alpha_at += cfg.period
        while now >= self._increase_at:
            self._timer_steps += 1
            self._increase()
            self._increase_at += cfg.period

    def _increase(self) -> None:
        cfg = self.cfg
        steps = max(self._timer_steps, self._byte_steps)
        if steps > cfg.fast_recovery:
            both = min(self._timer_steps, self._byte_steps)
            share = cfg.rate_hai * (both - cfg.fast_recovery) \
                if both > cfg.fast_recovery else cfg.rate_ai
            self.target = min(cfg.line_rate, self.target + share * cfg.line_rate)
        self.rate = min(cfg.line_rate, (self.rate + self.target) / 2)

    def _rtt_sample(self, rtt: float) -> None:
        self.base_rtt = rtt if self.base_rtt is None else min(self.base_rtt, rtt)
        self.srtt, self.rttvar = smoothed(self.srtt, self.rttvar, rtt)

    def on_ack(self, now: float, acked: int, rtt: float | None, ecn: bool) -> None:
        if rtt is not None:
            self._rtt_sample(rtt)
        self._timers(now)
        if ecn:
            self.cnps += 1
        if not ecn or (self._last_cnp >= 0 and now - self._last_cnp < self.cfg.cnp_interval):
            return
        cfg = self.cfg
        self._last_cnp = now
        if self._timer_steps or self._byte_steps:  # increased since the last cut
            self.target = self.rate
        self.rate = max(cfg.min_rate * cfg.line_rate, self.rate * (1 - self.alpha / 2))
        self.alpha = (1 - cfg.g) * self.alpha + cfg.g
        self.decreases += 1
        self._alpha_at = now + cfg.period
        self._increase_at = now + cfg.period
        self._bytes = self._timer_steps = self._byte_steps = 0

    def on_trim(self, now: float, nbytes: int) -> None:
        """RoCEv2 NICs do not know trimming: a trimmed packet is a damaged one, dropped."""

    def on_timeout(self, now: float, sent_at: float | None = None) -> None:
        """No reaction beyond Go-Back-N (DCQCN reacts to CNPs only)."""
