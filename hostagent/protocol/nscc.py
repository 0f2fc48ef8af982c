"""MRC's congestion control: a window in the manner of UET's NSCC (uet-1.0-nscc, from SMaRTT).

The knobs are named after the spec's `mrc_ctl_cc_nscc_cfg` (OCP MRC, mrc_ctl.h): base_rtt,
target_delay, qa_threshold, qa_gate, disable_qa, eta, fi, gamma, max_md_jump, max_cwnd,
adjust_period_threshold, adjust_bytes_threshold. The reactions follow UET's NSCC as htsim
(uec.cpp) implements it. Per ACK, queueing delay (RTT minus base RTT) against target_delay
and the ACK's ECN bit pick one quadrant:

| ECN | delay         | reaction |
|-----|---------------|----------|
| no  | below target  | proportional increase: more the further below the target |
| no  | above target  | fair increase: `fi` MSS per window of ACKed bytes |
| yes | above target  | multiplicative decrease by gamma x (avg_delay - target) / avg_delay, |
|     |               | at most `max_md_jump`, at most once per RTT |
| yes | below target  | nothing: a transient mark; spraying already moved the next packets away |

Increases are collected and applied once per `adjust_bytes_threshold` ACKed bytes or
`adjust_period_threshold` seconds, plus `eta` MSS per adjust period (NSCC's fulfil step).
A trimmed packet (a NACK TRIMMED) subtracts its bytes from the window. Quick adapt: a loss
signal (a trim), or the last sample's delay above `qa_threshold` (4 x target_delay unless
set), sets the window to the bytes ACKed in the last base RTT + target delay when that is
below max_cwnd >> qa_gate, then ignores signals for the bytes then in flight (they were sent
under the old window). Without ECN, delay alone never triggers the multiplicative decrease:
above the target the window keeps its fair increase, and only quick adapt shrinks it.

Every cut is bounded per smoothed RTT: multiplicative decreases and timeouts cut at most once
per RTT (and a timeout of a packet sent before the last cut not at all), and trims together
subtract at most `max_md_jump` of the window the RTT started with, so that a burst of signals
from one event (packets timing out on one dead path) is one reaction.

Deviations from UET NSCC, and why:
- constants are in MSS and RTTs of this fabric (constants.py), not htsim's scaling of a
  100 Gbit/s, 12 us reference network: the emulated fabric runs at Mbit/s with millisecond
  RTTs, where those scaled constants mean nothing;
- delay is RTT minus the smallest RTT seen (no NIC timestamps), and avg_delay an EWMA with
  gain 1/8 rather than 1/80: an agent sees a few hundred ACKs a second, not millions;
- no pacing (NSCC also paces); the NIC model (nic.py) keeps the host ports from overfilling;
- a retransmission timeout is a multiplicative cut by max_md_jump (htsim takes the packet's
  bytes off): on this fabric a timeout means hundreds of microseconds of silence or more,
  after which the old window is stale.
"""
from __future__ import annotations

from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from hostagent.protocol.constants import (
    ADJUST_BYTES_MSS,
    DELAY_GAIN,
    ETA,
    FI,
    FI_SCALE,
    GAMMA,
    MAX_MD_JUMP,
    QA_GATE,
    QA_THRESHOLD_TARGETS,
    RTTVAR_GAIN,
    SRTT_GAIN,
    TARGET_DELAY,
)


def smoothed(srtt: float | None, rttvar: float, rtt: float) -> tuple[float, float]:
    """RFC 6298's smoothed RTT and RTT variation after one sample: both congestion controls
    keep them, and the QP's timeout floor (srtt + 4 rttvar) reads them."""
    if srtt is None:
        return rtt, rtt / 2
    return ((1 - SRTT_GAIN) * srtt + SRTT_GAIN * rtt,
            (1 - RTTVAR_GAIN) * rttvar + RTTVAR_GAIN * abs(srtt - rtt))


@dataclass
class NsccConfig:
    mss: int
    init_cwnd: int  # bytes
    max_cwnd: int  # bytes
    target_delay: float = TARGET_DELAY  # seconds of queueing above the base RTT
    base_rtt: float | None = None  # seconds; None: the smallest RTT measured
    qa_threshold: float | None = None  # s of delay that triggers quick adapt; None: 4 x target
    qa_gate: int = QA_GATE  # quick adapt only when achieved < max_cwnd >> qa_gate
    disable_qa: bool = False
    eta: float = ETA  # MSS added every adjust period
    fi: float = FI  # fair increase: MSS per window of ACKed bytes, above the target
    fi_scale: float = FI_SCALE  # proportional increase: MSS per window at zero delay
    gamma: float = GAMMA  # multiplicative decrease gain on the delay overshoot
    max_md_jump: float = MAX_MD_JUMP  # largest share of the window one cut takes
    adjust_period_threshold: float | None = None  # s between fulfils; None: the base RTT
    adjust_bytes_threshold: int | None = None  # ACKed bytes between fulfils; None: 8 MSS


# Compiled by mypyc, a class may be subclassed by interpreted code only where it says so: tests
# give a QP a congestion control whose signals they set.
@mypyc_attr(allow_interpreted_subclasses=True)
class NsccCC:
    """The window of one QP. `allows` gates sending; the on_* methods are the signals."""

    def __init__(self, cfg: NsccConfig) -> None:
        self.cfg = cfg
        self.cwnd = float(cfg.init_cwnd)
        self.base_rtt: float | None = cfg.base_rtt
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.avg_delay = 0.0
        self.delay = 0.0  # the last sample's queueing delay
        self.decreases = 0
        self._last_decrease = -1.0
        self._trim_epoch = -1.0  # start of the RTT whose trims are being counted
        self._trim_budget = 0.0  # bytes trims may still take off in that RTT
        self._inc_bytes = 0.0
        self._received = 0
        self._last_adjust = 0.0
        self._achieved = 0
        self._qa_end = 0.0
        self._trigger_qa = False
        self._ignore = 0.0  # bytes of signals still to ignore after a quick adapt

    @property
    def min_cwnd(self) -> float:
        return float(self.cfg.mss)

    def allows(self, inflight: int, size: int, now: float = 0.0) -> bool:
        # max(cwnd, min_cwnd) without the property and max() calls: asked for every packet
        cwnd, floor = self.cwnd, self.cfg.mss
        return inflight + size <= (cwnd if cwnd > floor else floor) or inflight == 0

    def on_send(self, now: float, wire_bytes: int) -> None:
        """A window needs no per-packet bookkeeping (a rate does: dcqcn.py)."""

    def next_send_time(self) -> float | None:
        return None

    @property
    def delay_high(self) -> bool:
        return self.avg_delay > self.cfg.target_delay

    def _rtt(self) -> float:
        return self.srtt or self.base_rtt or 0.0

    def _rtt_sample(self, rtt: float) -> None:
        if self.cfg.base_rtt is None:
            self.base_rtt = rtt if self.base_rtt is None else min(self.base_rtt, rtt)
        self.srtt, self.rttvar = smoothed(self.srtt, self.rttvar, rtt)
        self.delay = max(0.0, rtt - (self.base_rtt or rtt))
        self.avg_delay += DELAY_GAIN * (self.delay - self.avg_delay)

    def _bound(self) -> None:
        self.cwnd = min(float(self.cfg.max_cwnd), max(self.min_cwnd, self.cwnd))

    def _cut(self, now: float, share: float) -> bool:
        """Take `share` (at most max_md_jump) of the window, at most once per RTT."""
        if self._last_decrease >= 0 and now - self._last_decrease < self._rtt():
            return False
        self._last_decrease = now
        self.decreases += 1
        self.cwnd *= 1 - min(max(share, 0.0), self.cfg.max_md_jump)
        self._bound()
        return True

    def _quick_adapt(self, now: float, loss: bool, signal: bool) -> bool:
        """NSCC's quick adapt; True when this signal is consumed by it (applied now, or a
        congestion `signal` about bytes sent before the last quick adapt: ignored)."""
        cfg = self.cfg
        if cfg.disable_qa:
            return False
        if self._ignore > 0 and signal:
            return True
        done = False
        if now > self._qa_end:
            qa_threshold = (cfg.qa_threshold if cfg.qa_threshold is not None
                            else QA_THRESHOLD_TARGETS * cfg.target_delay)
            if (self._qa_end and (self._trigger_qa or loss or self.delay > qa_threshold)
                    and self._achieved < cfg.max_cwnd >> cfg.qa_gate):
                if self._achieved < self.cwnd:
                    self.cwnd = max(float(self._achieved), self.min_cwnd)
                    self.decreases += 1
                    self._last_decrease = now
                self._ignore = self.cwnd
                self._trigger_qa = False
                done = True
            self._achieved = 0
            self._qa_end = now + (self.base_rtt or 0.0) + cfg.target_delay
        if done:
            self._inc_bytes, self._received = 0.0, 0
        return done

    def on_ack(self, now: float, acked: int, rtt: float | None, ecn: bool) -> None:
        cfg = self.cfg
        if rtt is not None:
            self._rtt_sample(rtt)
        self._achieved += acked
        if self._ignore > 0:
            self._ignore -= acked
        if self._quick_adapt(now, loss=False, signal=ecn):
            return
        delay = self.delay
        if ecn and delay >= cfg.target_delay:
            overshoot = (self.avg_delay - cfg.target_delay) / max(self.avg_delay, 1e-12)
            if self.avg_delay > cfg.target_delay:
                self._cut(now, cfg.gamma * overshoot)
        elif ecn:
            pass  # below the target: a transient mark, hold
        elif delay >= cfg.target_delay:
            self._inc_bytes += cfg.fi * cfg.mss * acked
        else:
            headroom = 1 - delay / cfg.target_delay if cfg.target_delay > 0 else 1.0
            self._inc_bytes += cfg.fi_scale * cfg.mss * acked * headroom
        self._received += acked
        period = cfg.adjust_period_threshold or self.base_rtt or 0.0
        threshold = cfg.adjust_bytes_threshold or ADJUST_BYTES_MSS * cfg.mss
        if self._received > threshold or now - self._last_adjust > period:
            self.cwnd += self._inc_bytes / max(self.cwnd, self.min_cwnd)
            if now - self._last_adjust >= period:
                self.cwnd += cfg.eta * cfg.mss
                self._last_adjust = now
            self._inc_bytes, self._received = 0.0, 0
        self._bound()

    def on_trim(self, now: float, nbytes: int) -> None:
        """A NACK TRIMMED: the trimmed bytes come off the window (all trims of one RTT
        together at most max_md_jump of it), and quick adapt is armed."""
        self._trigger_qa = True
        if self._quick_adapt(now, loss=True, signal=True):
            return
        if self._trim_epoch < 0 or now - self._trim_epoch >= self._rtt():
            self._trim_epoch = now
            self._trim_budget = self.cwnd * self.cfg.max_md_jump
        take = min(float(nbytes), self._trim_budget)
        if take > 0:
            self._trim_budget -= take
            self.cwnd -= take
            self.decreases += 1
            self._bound()

    def on_timeout(self, now: float, sent_at: float | None = None) -> None:
        """A retransmission timeout: one cut by max_md_jump per event. A packet sent before
        the last cut belongs to the event that cut (its loss was already answered), as TCP's
        recovery point makes one window's losses one event. No quick adapt: a timeout is
        silence on a path (often a dead one, with MRC), not a measure of achievable rate."""
        if sent_at is not None and sent_at < self._last_decrease:
            return
        self._cut(now, self.cfg.max_md_jump)
