"""The RoCEv2 baseline's congestion control: DCQCN (Zhu et al., SIGCOMM 2015), as an RNIC runs it.

Beside NSCC (nscc.py), which is a window driven by delay, ECN and trims, the baseline's NIC runs
the control RoCEv2 deployments use: a *rate*, driven by congestion notifications only.

- Notification point (the receiving NIC, rocev2.py): a CE-marked data packet, in order or not,
  makes it send a CNP, at most one per `cnp_interval` per QP; a CNP is an ACK with the ECN flag
  (the testbed's control header; a real NIC sends a separate CNP packet).
- Reaction point (the sending NIC, here): every CNP cuts the current rate by alpha/2 and moves
  alpha towards 1 by `g`. The target rate takes the current rate (before the cut) only if the
  rate has increased since the last cut: NVIDIA's firmware default (`clamp_tgt_rate` 0,
  `clamp_tgt_rate_after_time_inc` 1). The paper sets the target at every CNP; then a run of
  cuts in a row, each before the previous one has drained the queue, leaves the target at the
  lowest rate but one and recovery crawls at additive increase.
- Every `period` without a CNP, alpha decays by (1 - g).
- Every `period` (the rate-increase timer) or every `byte_counter` bytes sent (the byte
  counter), the rate increases: the first `fast_recovery` steps halve the distance to the
  target rate (fast recovery), then the target grows by `rate_ai` (additive increase), after
  `fast_recovery` more steps of both by `rate_hai` per step (hyper increase); the current rate
  moves halfway to the target each time.
- Timeouts and NACKs: no rate reaction; Go-Back-N (rocev2.py) is the reaction.
- Rate limiter: a token bucket filled at the *current* rate, `burst` packets deep (a NIC's
  pacing granularity): a packet leaves while the bucket is not in debt and takes its bytes
  out. A rate that has recovered is not held back by packets sent while it was low: the debt
  left by the last packet is paid at whatever the rate is meanwhile. The window (`max_cwnd`)
  only caps what is in flight, as a NIC caps outstanding work requests.

Scaled to this fabric: DCQCN's timers are tuned to datacenter RTTs of about 10 us; emulated
RTTs are milliseconds. The CNP spacing and the timers are therefore ratios to the path's base
RTT (`DcqcnConfig.for_path`), taken from the microsecond values over a 10 us reference RTT;
`CONSTANTS` lists every number with its source. `bench/dcqcn.py` sweeps both ratios over
0.5-20 RTTs on the simnet: the defaults reached 95%, 78% and 95% of the ideal with one QP
behind a half-rate port, a 4-to-1 incast and two QPs sharing a port; the best settings 97%,
85% and 95%; a timer shorter than the CNP spacing (rate increases outpacing the cuts) cost
most, down to QPs out of retries in the incast. What a real RNIC does differently: the
firmware also limits cuts to one per `rate_reduce_monitor_period` (4 us; the NP's spacing here
is always longer, so the rule would never bind), its own gains and increase steps (listed in
`CONSTANTS` beside the ones used), and the NP spaces CNPs per QP in hardware while here the
receiving QP does (the same rule).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from hostagent.protocol import nic, wire
from hostagent.protocol.nscc import smoothed

PACING_SLACK: Final = 1e-9  # s: float rounding must not cost a burst its last packet
REFERENCE_RTT: Final = 10e-6  # s: the datacenter fabric RTT DCQCN's microsecond timers are tuned to


@dataclass(frozen=True)
class Constant:
    value: float
    unit: str
    source: str


CONSTANTS: Final = MappingProxyType({
    "cnp_rtts": Constant(
        5.0, "base RTTs", "NP: at most one CNP per QP per 50 us (Zhu et al. 2015, N = 50 us) over "
        "the 10 us reference RTT; NVIDIA firmware's min_time_between_cnps is 4 us (0.4 RTT)"),
    "timer_rtts": Constant(
        5.5, "base RTTs", "RP: alpha update timer K = 55 us and rate-increase timer T = 55 us "
        "(Zhu et al. 2015; ns-3 DCQCN AlphaResumInterval 55 us) over the 10 us reference RTT; "
        "NVIDIA firmware's rpg_time_reset is 300 us (30 RTTs)"),
    "byte_counter_periods": Constant(
        1.0, "timer periods of line rate", "chosen: at line rate the byte counter steps as "
        "often as the timer (Zhu et al. use B = 10 MB, 2 ms at 40 Gbit/s; NVIDIA rpg_byte_reset "
        "32 KB, 2.6 us at 100 Gbit/s: the two disagree by three orders of magnitude)"),
    "g": Constant(
        1 / 16, "", "chosen: Zhu et al. use 1/256 (NVIDIA dce_tcp_g 1019/1024: 1/205); a run "
        "here lasts a few hundred base RTTs, and at 1/256 alpha would stay near its initial 1 "
        "throughout (every cut a halving)"),
    "fast_recovery": Constant(5, "steps", "F = 5 (Zhu et al. 2015; ns-3 FastRecoveryTimes 5); "
                              "NVIDIA rpg_threshold is 1"),
    "rate_ai": Constant(
        0.02, "share of line rate per step", "chosen: Zhu et al. use 40 Mbit/s at 40 Gbit/s "
        "(0.1%), NVIDIA rpg_ai_rate 5 Mbit/s; at a few hundred steps per run 0.1% would never "
        "bring a cut rate back"),
    "rate_hai": Constant(0.1, "share of line rate per step",
                         "chosen, 5x rate_ai (NVIDIA: rpg_hai_rate 50 Mbit/s, 10x rpg_ai_rate)"),
    "min_rate": Constant(0.01, "share of line rate", "chosen (NVIDIA rpg_min_rate: 1 Mbit/s)"),
    "burst": Constant(4, "packets", "chosen: a NIC paces in bursts of a few packets"),
    # the real frame's (a scenario with fabric.real_rate, where a run lasts as many RTTs as the
    # real fabric's would): the paper's, as it states them
    "g_real": Constant(1 / 256, "", "g = 1/256 (Zhu et al. 2015)"),
    "rate_ai_real": Constant(
        0.001, "share of line rate per step", "R_AI = 40 Mbit/s at 40 Gbit/s (Zhu et al. "
        "2015), a share of the line rate so that it means the same at every rate"),
    "rate_hai_real": Constant(
        0.01, "share of line rate per step", "10x rate_ai: NVIDIA's rpg_hai_rate over "
        "rpg_ai_rate (50 / 5 Mbit/s; ns-3's DCQCN RateHAI / RateAI the same); the paper gives "
        "hyper increase no number of its own"),
    "byte_counter_real": Constant(10e6, "bytes", "B = 10 MB (Zhu et al. 2015); bytes are the "
                                  "real fabric's in both frames"),
})


def _constant(name: str) -> float:
    return CONSTANTS[name].value


@dataclass
class DcqcnConfig:
    mss: int
    max_cwnd: int  # bytes in flight at most
    line_rate: float  # bit/s: the port's rate, where a QP starts
    period: float = _constant("timer_rtts") * REFERENCE_RTT  # s: alpha and rate-increase timer
    cnp_interval: float = _constant("cnp_rtts") * REFERENCE_RTT  # s: the NP's CNP spacing
    g: float = _constant("g")
    byte_counter: int = 0  # bytes sent between byte-counter steps; 0: byte_counter_periods
    fast_recovery: int = int(_constant("fast_recovery"))
    rate_ai: float = _constant("rate_ai")
    rate_hai: float = _constant("rate_hai")
    min_rate: float = _constant("min_rate")
    burst: int = int(_constant("burst"))  # packets that may leave back to back, >= 1

    def __post_init__(self) -> None:
        if not self.byte_counter:
            line_bytes = self.period * self.line_rate / 8
            self.byte_counter = max(self.packet, int(_constant("byte_counter_periods")
                                                     * line_bytes))

    @property
    def packet(self) -> int:
        """Line bytes of a full packet."""
        return self.mss + wire.HEADER_SIZE + nic.FRAME_OVERHEAD

    @classmethod
    def for_path(cls, mss: int, max_cwnd: int, line_rate: float, base_rtt: float,
                 cnp_rtts: float = _constant("cnp_rtts"),
                 timer_rtts: float = _constant("timer_rtts"), g: float = _constant("g"),
                 rate_ai: float = _constant("rate_ai"), rate_hai: float = _constant("rate_hai"),
                 byte_counter: int = 0) -> DcqcnConfig:
        """DCQCN's spacing and timers for a path of this base RTT (seconds), as ratios to it,
        and its gains (the testbed gives the paper's in the real frame, the small regime's
        otherwise: testbed/fabric/dcqcn_gains.py)."""
        return cls(mss, max_cwnd, line_rate, period=timer_rtts * base_rtt,
                   cnp_interval=cnp_rtts * base_rtt, g=g, rate_ai=rate_ai, rate_hai=rate_hai,
                   byte_counter=byte_counter)


class DcqcnCC:
    """The reaction point of one QP: its rate, the timers and byte counter that raise it, and
    the token bucket that paces packets at it."""

    def __init__(self, cfg: DcqcnConfig) -> None:
        self.cfg = cfg
        self.rate = cfg.line_rate  # bit/s, current
        self.target = cfg.line_rate
        self.alpha = 1.0
        self.decreases = 0  # rate cuts (one per CNP)
        self.cnps = 0  # CNPs received (ACKs with the ECN flag)
        self.base_rtt: float | None = None
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.delay_high = False  # no delay signal in DCQCN
        self._capacity = (cfg.burst - 1) * cfg.packet  # bytes the bucket holds at most
        self._tokens = float(self._capacity)  # bytes; below 0: the debt of the last packet
        self._filled_at = 0.0  # when `_tokens` was last brought up to date
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
        if now > self._filled_at:  # _fill inlined: asked for every packet
            self._tokens = min(self._capacity,
                               self._tokens + (now - self._filled_at) * self.rate / 8)
            self._filled_at = now
        return self._tokens >= -PACING_SLACK * self.rate / 8

    def _fill(self, now: float) -> None:
        """Bring the bucket up to `now` at the rate in force since it was last filled (every
        rate change fills it first, so each stretch of time counts at its own rate)."""
        if now > self._filled_at:
            self._tokens = min(self._capacity,
                               self._tokens + (now - self._filled_at) * self.rate / 8)
            self._filled_at = now

    def next_send_time(self) -> float:
        """When the bucket is out of debt at the current rate, or the next rate increase if
        that comes first (the debt is then paid faster)."""
        ready = self._filled_at + max(0.0, -self._tokens) * 8 / self.rate
        if self._increase_at is not None and self.rate < self.cfg.line_rate:
            return min(ready, max(self._increase_at, self._filled_at))
        return ready

    def on_send(self, now: float, wire_bytes: int) -> None:
        if now > self._filled_at:  # (allows() filled it at this instant already)
            self._fill(now)
        self._tokens -= wire_bytes
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
            self._fill(self._increase_at)
            self._timer_steps += 1
            self._increase()
            self._increase_at += cfg.period

    def _increase(self) -> None:
        cfg = self.cfg
        steps = max(self._timer_steps, self._byte_steps)
        if steps > cfg.fast_recovery:
            both = min(self._timer_steps, self._byte_steps)
            share = (cfg.rate_hai * (both - cfg.fast_recovery)
                     if both > cfg.fast_recovery else cfg.rate_ai)
            self.target = min(cfg.line_rate, self.target + share * cfg.line_rate)
        self.rate = min(cfg.line_rate, (self.rate + self.target) / 2)

    def _rtt_sample(self, rtt: float) -> None:
        self.base_rtt = rtt if self.base_rtt is None else min(self.base_rtt, rtt)
        self.srtt, self.rttvar = smoothed(self.srtt, self.rttvar, rtt)

    def on_ack(self, now: float, acked: int, rtt: float | None, ecn: bool) -> None:
        """An ACK; `ecn`: it is a CNP (the NP spaced them already: each one cuts)."""
        if rtt is not None:
            self._rtt_sample(rtt)
        self._timers(now)
        if not ecn:
            return
        cfg = self.cfg
        self.cnps += 1
        self._fill(now)
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
