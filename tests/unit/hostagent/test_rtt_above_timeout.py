"""MRC on a path whose RTT exceeds the ACK timeout (found with bench/agent.py: one
fabric path where the agents' CPU, not the link, set a 30-60 ms RTT against an 11.4 ms timeout).

Before the fix every packet timed out and was resent, no RTT sample survived Karn's rule (the
ACK of a resent packet was thrown away), the timeout never rose, nothing cut the window, and
the QP failed after its retries. The ACK echoes the send time of the copy that triggered it,
so every ACK is an RTT sample (qp.py); an ACK for a copy sent before its packet timed out
shows the timeout was spurious: the queue is longer than the timeout, and the window is cut,
once per RTT (mrc.py); a timer expiring after its path delivered or the estimate rose starts again;
and while the peer has answered nothing, one resend per timer pass asks for all."""
from __future__ import annotations

import random

from hostagent.protocol.dcqcn import REFERENCE_RTT
from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import QPConfig, WriteDone
from hostagent.protocol.rocev2 import RoceQP

from .simnet import Link, PathModel, SimNet

ONE_EV = [(0, 0)]  # one plane, one spine: nothing to spray over, as on bench/agent.py's path


def one_path_pair(size: int, cfg: QPConfig, seed: int = 0):
    bufs = bytearray(size), bytearray(size)
    pol = EVPolicy()
    a = MrcQP(1, 2, memoryview(bufs[0]), cfg, EVSet.build(ONE_EV, pol, random.Random(seed)),
              seed)
    b = MrcQP(2, 1, memoryview(bufs[1]), cfg, EVSet.build(ONE_EV, pol, random.Random(seed + 1)),
              seed + 1)
    return a, b, bufs


def done(qp) -> bool:
    return any(isinstance(e, WriteDone) for e in qp.events)


def test_mrc_converges_both_ways_over_one_path_whose_rtt_exceeds_the_timeout():
    """4 MiB each way at once over one EV: a 5 MB/s port each way and an ACK queued behind the
    data going its way (a busy host answers in the order things arrive), windows of 256 KiB to
    1 MiB, so that the first window alone takes 52 ms to drain against an 11.4 ms timeout (the
    bench path's default). Both writes complete, at a good share of the port's rate, with few
    resends. Before the fix: both QPs failed, every packet resent over and over."""
    size, rate = 4 << 20, 5e6
    cfg = QPConfig(mss=1024, init_cwnd=256 << 10, max_cwnd=1 << 20, timeout=0.0114,
                   base_rtt=REFERENCE_RTT)
    a, b, bufs = one_path_pair(size, cfg)
    data = random.Random(1).randbytes(size), random.Random(2).randbytes(size)
    a.post_write(0, memoryview(data[0]), 0, None, 0.0, peer=1)
    b.post_write(0, memoryview(data[1]), 0, None, 0.0, peer=0)
    net = SimNet(a, b, seed=3)
    for side in ("a", "b"):
        net.paths[(side, 0)] = PathModel(latency=100e-6, jitter=20e-6, link=Link(rate))
    srtts = [0.0]

    def finished() -> bool:  # asked after every step of the network: the RTT at each
        srtts.append(a.cc.srtt or 0.0)
        return bool(a.failed or b.failed or (done(a) and done(b)))
    end = net.run(finished, until=5.0)
    assert a.failed is None and b.failed is None, (a.failed, b.failed)
    assert done(a) and done(b), f"not done after {end:.2f} s"
    assert bytes(bufs[1]) == data[0] and bytes(bufs[0]) == data[1]
    assert max(srtts) > 3 * cfg.timeout, "the path's smoothed RTT did exceed the timeout"
    goodput = size / end
    assert goodput >= 0.8 * rate, f"{goodput / rate:.2f} of the port's rate"
    packets = size // cfg.mss
    for qp in (a, b):
        assert qp.counters.retransmits <= 0.05 * packets, qp.counters


def test_a_resent_packets_ack_is_an_rtt_sample_that_raises_the_timeout():
    """One packet into a path 10 ms long against a 2 ms timeout: it times out and is resent
    before its first ACK can come back. That ACK echoes the first copy's send time: a valid
    sample (Karn's rule threw it away, and the QP never learnt the RTT), and the proof that
    the timeout was spurious. The timeout rises above the RTT (srtt + 4 rttvar), and the next
    writes wait long enough: no timeout at all."""
    cfg = QPConfig(mss=256, init_cwnd=8 * 1024, max_cwnd=32 * 1024, timeout=0.002,
                   base_rtt=REFERENCE_RTT)
    a, b, _ = one_path_pair(256, cfg)
    net = SimNet(a, b, seed=4)
    for side in ("a", "b"):
        net.paths[(side, 0)] = PathModel(latency=5e-3, jitter=0.0)
    a.post_write(0, memoryview(bytes(256)), 0, None, 0.0, peer=1)
    net.run(lambda: done(a))
    assert a.counters.timeouts >= 1 and a.counters.spurious_timeouts == 1, a.counters
    assert a.cc.srtt is not None and a.cc.srtt >= 0.01
    assert a._timeout() > 0.01
    timeouts = a.counters.timeouts
    for k in range(1, 6):
        a.events.clear()
        a.post_write(k, memoryview(bytes(256)), 0, None, net.now, peer=1)
        net.run(lambda: done(a))
    assert a.counters.timeouts == timeouts, "the later writes timed out again"


def test_late_acks_cut_the_window_once_per_rtt():
    """A window of 32 packets into a path 10 ms long, timeout 2 ms: every packet times out,
    and the ACKs of the first copies show each timeout was spurious. A queue longer than the
    timeout is congestion: the window is cut, once for the whole window (not once per late
    ACK, which took it to its floor), with quick adapt off so that only this cuts."""
    cfg = QPConfig(mss=256, init_cwnd=8 * 1024, max_cwnd=32 * 1024, timeout=0.002,
                   base_rtt=REFERENCE_RTT)
    a, b, _ = one_path_pair(8 * 1024, cfg)
    a.cc.cfg.disable_qa = True
    net = SimNet(a, b, seed=5)
    for side in ("a", "b"):
        net.paths[(side, 0)] = PathModel(latency=5e-3, jitter=0.0)
    a.post_write(0, memoryview(bytes(8 * 1024)), 0, None, 0.0, peer=1)
    net.run(lambda: done(a))
    assert a.counters.spurious_timeouts >= 2, a.counters
    assert a.cc.decreases == 1, a.cc.decreases
    assert a.cc.cwnd < 0.75 * cfg.init_cwnd, a.cc.cwnd


def test_a_silent_peer_gets_one_resend_per_timer_pass_not_the_whole_window():
    """The same window, the peer silent throughout (its ACKs dropped): each timer pass resends
    one packet for all (TCP resends one segment per timeout), and the QP still fails on the
    spec's schedule. Resending all 32 at each pass only fed the queue that made them late."""
    cfg = QPConfig(mss=256, init_cwnd=8 * 1024, max_cwnd=32 * 1024, timeout=0.002,
                   linear_cnt=3, exp_cnt=2, base_rtt=REFERENCE_RTT)
    a, b, _ = one_path_pair(8 * 1024, cfg)
    net = SimNet(a, b, seed=6)
    net.paths[("b", 0)] = PathModel(dead=True)
    a.post_write(0, memoryview(bytes(8 * 1024)), 0, None, 0.0, peer=1)
    end = net.run(lambda: a.failed is not None)
    assert a.failed and "6 timeouts in a row" in a.failed, a.failed
    assert a.counters.packet_timeouts > 32 * 5, "every packet counts its timeouts"
    assert a.counters.retransmits == 5, a.counters
    assert end <= 4 * 0.002 + 0.004 + 0.008 + 1e-6, end


def test_rocev2_keeps_karns_rule():
    """RoCEv2's real headers carry no send time: an ACK for a resent packet cannot say which
    copy it answers, so the baseline takes no RTT sample from it and tells no spurious
    timeout (the testbed's shared header would let it: that would be MRC's echo, not RoCE)."""
    cfg = QPConfig(mss=256, init_cwnd=8 * 1024, max_cwnd=32 * 1024, timeout=0.002,
                   base_rtt=REFERENCE_RTT)
    bufs = bytearray(256), bytearray(256)
    a, b = RoceQP(1, 2, memoryview(bufs[0]), cfg, 7), RoceQP(2, 1, memoryview(bufs[1]), cfg, 8)
    net = SimNet(a, b, seed=7)
    for side in ("a", "b"):
        net.paths[(side, 0)] = PathModel(latency=5e-3, jitter=0.0)
    a.post_write(0, memoryview(bytes(256)), 0, None, 0.0, peer=1)
    net.run(lambda: done(a))
    assert a.counters.timeouts >= 1
    assert a.cc.srtt is None and a.counters.spurious_timeouts == 0
