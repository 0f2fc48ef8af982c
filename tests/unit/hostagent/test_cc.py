"""Congestion control, one signal at a time: NSCC's reactions (nscc.py), each cut at most once per
RTT whatever the signal, and the baseline's DCQCN-like rate (dcqcn.py)."""
from __future__ import annotations

import pytest

from hostagent.protocol.dcqcn import DcqcnCC, DcqcnConfig
from hostagent.protocol.evs import EVPolicy
from hostagent.protocol.nscc import NsccCC, NsccConfig, smoothed
from hostagent.protocol.qp import WriteDone

from .simnet import PathModel, SimNet
from .test_transport import events, layout, mrc_pair, post_all

MSS = 1000
RTT = 0.001  # s: the base RTT every test establishes first


def nscc(**kw) -> NsccCC:
    cfg = {"mss": MSS, "init_cwnd": 64 * MSS, "max_cwnd": 256 * MSS, "target_delay": 0.002,
           "disable_qa": True, "adjust_period_threshold": 100.0,
           "adjust_bytes_threshold": 10**9}
    cfg.update(kw)
    cc = NsccCC(NsccConfig(**cfg))
    cc.on_ack(0.0, MSS, RTT, ecn=False)  # base RTT 1 ms, no queueing
    cc.cwnd = 64 * MSS
    cc._inc_bytes, cc._received = 0.0, 0  # what that first ACK would add: none
    return cc


def test_timeouts_of_one_event_cut_the_window_once_per_rtt():
    """Eight packets timing out together (one dead path of eight) are one
    congestion event: one cut, not eight. A timeout a smoothed RTT later cuts again."""
    cc = nscc()
    for _ in range(8):
        cc.on_timeout(1.0)
    assert cc.cwnd == pytest.approx(32 * MSS), "one halving, not 2^-8"
    cc.on_timeout(1.0 + 0.5 * RTT)
    assert cc.cwnd == pytest.approx(32 * MSS), "still within the RTT of the last cut"
    cc.on_timeout(1.0 + 1.01 * RTT, sent_at=0.999)
    assert cc.cwnd == pytest.approx(32 * MSS), "sent before the cut: the same event"
    cc.on_timeout(1.0 + 1.01 * RTT, sent_at=1.0 + 0.001 * RTT)
    assert cc.cwnd == pytest.approx(16 * MSS)


def test_ecn_above_target_cuts_by_the_overshoot_at_most_half_once_per_rtt():
    cc = nscc()
    cc.avg_delay = 0.004  # twice the 2 ms target: gamma x (4 - 2) / 4 = 0.4
    cc.on_ack(1.0, MSS, RTT + 0.004, ecn=True)
    overshoot = (cc.avg_delay - 0.002) / cc.avg_delay
    assert cc.cwnd == pytest.approx(64 * MSS * (1 - 0.8 * overshoot))
    before = cc.cwnd
    cc.on_ack(1.0 + 0.1 * RTT, MSS, RTT + 0.004, ecn=True)
    assert cc.cwnd == before, "a second mark in the same RTT does not cut again"
    cc.avg_delay = 1.0  # a huge overshoot: gamma x ~1 = 0.8, but never more than half
    cc.on_ack(2.0, MSS, RTT + 1.0, ecn=True)
    assert cc.cwnd == pytest.approx(before / 2)


def test_ecn_below_target_holds_and_clean_acks_increase():
    cc = nscc(adjust_bytes_threshold=8 * MSS, eta=0.0)
    cc.on_ack(1.0, 8 * MSS, RTT, ecn=True)
    assert cc.cwnd == 64 * MSS, "a mark at low delay: hold (spraying moves the packets)"
    cc.on_ack(1.0 + 2 * RTT, 16 * MSS, RTT, ecn=False)
    low = cc.cwnd
    assert low > 64 * MSS, "no mark, no queueing: proportional increase"
    c2 = nscc(adjust_bytes_threshold=8 * MSS, eta=0.0)
    c2.on_ack(1.0 + 2 * RTT, 16 * MSS, RTT + 0.003, ecn=False)
    assert 64 * MSS < c2.cwnd < low, "no mark above the target: fair increase, slower"


def test_trims_take_their_bytes_off_at_most_half_the_window_per_rtt():
    cc = nscc()
    cc.on_trim(1.0, 4 * MSS)
    assert cc.cwnd == pytest.approx(60 * MSS), "a trim subtracts the trimmed bytes"
    for _ in range(100):
        cc.on_trim(1.0 + 0.5 * RTT, 4 * MSS)
    assert cc.cwnd == pytest.approx(32 * MSS), "one RTT of trims takes at most half"
    cc.on_trim(1.0 + 1.01 * RTT, 4 * MSS)
    assert cc.cwnd == pytest.approx(28 * MSS)


def test_quick_adapt_sets_the_window_to_what_was_achieved_after_a_loss():
    cc = nscc(disable_qa=False, qa_gate=0)
    cc.on_ack(1.0, MSS, RTT, ecn=False)  # opens a quick-adapt period (base RTT + target)
    cc.on_ack(1.0 + 0.5 * RTT, 3 * MSS, RTT, ecn=False)
    cc.on_ack(1.0 + 0.7 * RTT, 3 * MSS, RTT, ecn=False)  # 6 MSS achieved in the period
    cc.on_trim(1.0 + 3.1 * RTT + 0.002, MSS)  # a loss signal after the period
    assert cc.cwnd == pytest.approx(6 * MSS)


def test_one_dead_path_of_eight_leaves_the_window_well_above_its_floor():
    """On the simulated network: before the once-per-RTT rule, the window hit its
    floor (one MSS) within a millisecond of one dead path."""
    writes, total = layout([400_000], seed=11)
    a, b, _ = mrc_pair(total, seed=11, policy=EVPolicy(probe_interval=0.002))
    post_all(a, writes)
    net = SimNet(a, b, seed=11)
    net.paths[("a", 3)] = PathModel(dead=True)
    lowest = [a.cc.cwnd]

    def done() -> bool:  # asked after every step of the network: the window at each
        lowest.append(a.cc.cwnd)
        return len(events(a, WriteDone)) == 1
    net.run(done)
    assert a.counters.timeouts + a.counters.rack_losses >= 1, "the dead path was found"
    assert min(lowest) >= a.cfg.init_cwnd / 2 - 1, lowest


def test_dcqcn_cuts_by_alpha_and_recovers_towards_the_target():
    cfg = DcqcnConfig(mss=MSS, max_cwnd=256 * MSS, line_rate=1e9, period=0.001,
                      cnp_interval=0.0001, g=1 / 16)
    cc = DcqcnCC(cfg)
    cc.on_ack(0.0, MSS, RTT, ecn=True)
    assert cc.rate == pytest.approx(0.5e9), "alpha starts at 1: the first CNP halves"
    assert cc.target == pytest.approx(1e9)
    alpha = cc.alpha
    cc.on_ack(0.00005, MSS, RTT, ecn=True)
    assert cc.rate == pytest.approx(0.5e9 * (1 - alpha / 2)), "the NP spaced them: each cuts"
    assert (cc.cnps, cc.decreases) == (2, 2)
    cc.on_ack(0.00006, MSS, RTT, ecn=False)
    assert cc.decreases == 2, "an ACK without the ECN flag is no CNP"
    low = cc.rate
    cc.on_ack(0.00005 + 0.00105, MSS, RTT, ecn=False)  # one increase period: fast recovery
    assert cc.rate == pytest.approx((low + 1e9) / 2)
    cc.on_timeout(0.01)
    cc.on_trim(0.01, MSS)
    cc.allows(0, MSS, 0.0102)
    assert cc.rate > low, "timeouts and trims are no signal; the timers keep increasing"
    assert cc.alpha < alpha, "alpha decays without CNPs"


def test_dcqcn_keeps_its_target_through_cuts_in_a_row():
    """NVIDIA's default (clamp_tgt_rate 0): a cut takes the current rate as the target only
    if the rate increased since the last cut. Cuts in a row (each CNP interval while the
    queue they come from drains) keep the rate the first one left from as the target, so
    fast recovery heads back there, not to the rate before the last cut."""
    cfg = DcqcnConfig(mss=MSS, max_cwnd=256 * MSS, line_rate=1e9, period=0.001,
                      cnp_interval=0.0001, g=1 / 16, fast_recovery=5)
    cc = DcqcnCC(cfg)
    cc.allows(0, MSS, 0.0)
    cc.allows(0, MSS, 0.0035)  # three increase periods at line rate: the rate has increased
    for k in range(4):  # a run of cuts, one per CNP interval, no increase between them
        cc.on_ack(0.004 + k * 0.0002, MSS, RTT, ecn=True)
    assert cc.rate < 0.2e9
    assert cc.target == pytest.approx(1e9), "the target is the rate before the run of cuts"
    low = cc.rate
    cc.allows(0, MSS, 0.0046 + 0.00105)  # one increase period later
    assert cc.rate == pytest.approx((low + 1e9) / 2)
    cc.allows(0, MSS, 0.0046 + 0.00205)  # another: the rate increased since the last cut
    before = cc.rate
    cc.on_ack(0.0046 + 0.0021, MSS, RTT, ecn=True)
    assert cc.target == pytest.approx(before), "after an increase, a cut takes the rate"


def test_dcqcn_paces_packets_at_its_rate():
    cfg = DcqcnConfig(mss=MSS, max_cwnd=256 * MSS, line_rate=8e6, burst=1)  # 1 byte per us
    cc = DcqcnCC(cfg)
    assert cc.allows(0, MSS, 0.0)
    cc.on_send(0.0, 1000)
    assert not cc.allows(0, MSS, 0.0005)
    assert cc.next_send_time() == pytest.approx(0.001), "1000 bytes at 1 byte per us"
    assert cc.allows(0, MSS, 0.001)


def test_dcqcn_sends_a_burst_then_paces():
    """The bucket holds `burst` packets: that many leave back to back, then one per packet
    time at the rate."""
    cfg = DcqcnConfig(mss=MSS, max_cwnd=256 * MSS, line_rate=8e6, burst=4)
    cc = DcqcnCC(cfg)
    for _ in range(4):
        assert cc.allows(0, MSS, 0.0)
        cc.on_send(0.0, cfg.packet)
    assert not cc.allows(0, MSS, 0.0)
    assert cc.next_send_time() == pytest.approx(cfg.packet * 1e-6)


def test_dcqcn_a_recovered_rate_is_not_held_back_by_packets_sent_while_it_was_low():
    """A NIC's rate limiter applies the current rate to the next packet. A burst sent at the
    1% floor books a packet time at 1% (at 25 Mbit/s with 4 KB packets, 1.3 ms x 100 per
    packet); fast recovery's first step takes the rate above half the line rate one timer
    period later, and from then on the QP waits at most about a packet time at that rate."""
    mss, line = 4096, 25e6
    cfg = DcqcnConfig(mss=mss, max_cwnd=256 * mss, line_rate=line, period=0.005,
                      cnp_interval=0.001, burst=4, byte_counter=10**9)  # the timer alone
    cc = DcqcnCC(cfg)
    now = 0.0
    cc.allows(0, mss, now)
    while cc.rate > cfg.min_rate * line:  # CNPs in a row, before any increase: to the floor
        now += cfg.cnp_interval
        cc.on_ack(now, mss, None, ecn=True)
    assert cc.target == line, "no increase between the cuts: the target stays"
    for _ in range(cfg.burst):
        assert cc.allows(0, mss, now)
        cc.on_send(now, cfg.packet)
    floor_at, packet_time = now, cfg.packet * 8 / line
    assert cc.next_send_time() <= floor_at + cfg.period, "the QP wakes at the next increase"
    while cc.rate <= line / 2:
        now += packet_time / 10
        cc.allows(0, mss, now)
    assert now - floor_at <= cfg.period + packet_time / 10, "fast recovery's first step"
    # at most one packet of debt (the bucket lets a packet leave while not in debt), paid at
    # half the line rate or more: two packet times
    wait = cc.next_send_time() - now
    assert wait <= 2 * packet_time, f"waits {wait:.3f} s, {wait / packet_time:.0f} packet times"


def test_rtt_smoothing_follows_rfc_6298():
    """First sample: srtt = rtt, rttvar = rtt/2; then srtt += (rtt - srtt)/8 and
    rttvar += (|srtt - rtt| - rttvar)/4, the variation taken against the old srtt."""
    assert smoothed(None, 0.0, 0.004) == (0.004, 0.002)
    assert smoothed(0.008, 0.002, 0.016) == pytest.approx((0.009, 0.0035))
