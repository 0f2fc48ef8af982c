"""The RoCEv2 baseline as an RNIC behaves: one retransmit timer per QP, started over by every
response, Go-Back-N on its expiry, one timeout counted per expiry, and a notification point that
sends CNPs for CE-marked packets whatever their PSN, at most one per CNP interval."""
from __future__ import annotations

import pytest

from hostagent.protocol import wire
from hostagent.protocol.dcqcn import REFERENCE_RTT
from hostagent.protocol.qp import QPConfig, WriteDone, retries_exhausted, time_to_fail
from hostagent.protocol.rocev2 import RoceQP

from .simnet import CrossQueue, Link, PathModel, SimNet
from .test_rtt_above_timeout import one_path_pair

T = 0.010  # s: the ACK timeout


def pair(size: int, cfg: QPConfig) -> tuple[RoceQP, RoceQP]:
    return (RoceQP(1, 2, memoryview(bytearray(size)), cfg, 1),
            RoceQP(2, 1, memoryview(bytearray(size)), cfg, 2))


def data_of(out: list[tuple[int, bytes]]) -> list[bytes]:
    return [d for _, d in out if wire.decode(d)[0].type == wire.DATA]


def send_all(qp: RoceQP, now: float) -> list[bytes]:
    """What `qp` sends from `now` on, a microsecond apart until it stops (its pacing lets a
    burst of a few packets out at a time; at 100 Gbit/s the next ones within the microsecond)."""
    sent: list[bytes] = []
    while batch := data_of(qp.poll_transmit(now)):
        sent += batch
        now += 1e-6
    return sent


def cnps_in(out: list[tuple[int, bytes]]) -> int:
    return sum(1 for _, d in out
               if wire.decode(d)[0].type == wire.ACK and wire.decode(d)[0].flags & wire.ECN)


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_one_qp_behind_a_bottleneck_with_a_queue_longer_than_the_timeout(share):
    """A port at 25% or 50% of the line rate with 20 ms of another flow's queue in front of
    it, the timeout 10 ms. The first ACK cannot come back before the queue's 20 ms: the timer
    expires once per timeout until then; from there every response starts it over. With
    timers counting from each packet's send, each Go-Back-N round's copies timed out again
    behind the queue: 3.7 s and 12,181 timeouts at 50%, a failed QP at 25%."""
    size, mss, line, wait = 1_000_000, 1024, 100e6, 0.020
    a, b = pair(size, QPConfig(mss=mss, max_cwnd=256 * 1024, timeout=T, line_rate=line,
                               base_rtt=REFERENCE_RTT))
    net = SimNet(a, b, seed=3)
    rate = share * line / 8  # bytes/s
    net.paths[("a", 0)] = PathModel(latency=50e-6, jitter=0.0, link=Link(rate=rate),
                                    cross=CrossQueue(rate=rate, backlog=lambda t: wait * rate))
    net.paths[("b", 0)] = PathModel(latency=50e-6, jitter=0.0)
    a.post_write(0, memoryview(bytes(size)), 0, None, 0.0, peer=1)
    end = net.run(lambda: any(isinstance(e, WriteDone) for e in a.events), until=30.0)
    assert not a.failed, a.failed
    ideal = size * (1 + wire.HEADER_SIZE / mss) / rate  # the simnet's packets at the port
    assert end < 1.5 * ideal + wait, (end, ideal)
    assert a.counters.timeouts <= wait // T + 1, a.counters


def test_the_qp_timer_counts_from_the_last_ack_not_from_each_send():
    """Eight packets leave at 0; at T/2 an ACK covers the first four (an RTT sample of T/2:
    the timeout becomes srtt + 4 rttvar = T/2 + 4 T/4 = 1.5 T). The other four were sent at 0,
    but the QP's timer counts from that ACK: it expires at T/2 + 1.5 T = 2 T, not at 1.5 T,
    once, and Go-Back-N resends the four."""
    cfg = QPConfig(mss=256, max_cwnd=32 * 1024, timeout=T, ack_every=4, base_rtt=REFERENCE_RTT)
    a, b = pair(8 * 256, cfg)
    a.post_write(0, memoryview(bytes(8 * 256)), 0, None, 0.0, peer=1)
    sent = send_all(a, 0.0)
    assert len(sent) == 8
    for d in sent[:4]:
        b.receive(d, T / 2)
    acks = b.poll_transmit(T / 2)
    assert len(acks) == 1
    a.receive(acks[0][1], T / 2)
    assert a._timeout() == pytest.approx(1.5 * T)
    a.on_timer(1.9 * T)
    assert a.counters.timeouts == 0 and not data_of(a.poll_transmit(1.9 * T))
    assert a.next_deadline() == pytest.approx(2 * T)
    a.on_timer(2 * T)
    assert (a.counters.timeouts, a.counters.packet_timeouts) == (1, 1)
    resent = [wire.decode(d)[0].psn for d in data_of(a.poll_transmit(2 * T))]
    assert resent == [4, 5, 6, 7], "Go-Back-N from the oldest unacknowledged PSN"


def test_a_stalled_window_counts_one_timeout_per_expiry():
    """A window of 32 packets whose ACKs never come back: the QP's timer expires on the
    spec's schedule (3 linear retries, then 2 doubling), each expiry counted once (not once
    per packet of the window), each resending the window, and the QP fails after the 6th,
    time_to_fail after the first send."""
    cfg = QPConfig(mss=256, max_cwnd=32 * 1024, timeout=T, linear_cnt=3, exp_cnt=2,
                   base_rtt=REFERENCE_RTT)
    a, b = pair(32 * 256, cfg)
    net = SimNet(a, b, seed=4)
    net.paths[("b", 0)] = PathModel(dead=True)
    a.post_write(0, memoryview(bytes(32 * 256)), 0, None, 0.0, peer=1)
    end = net.run(lambda: a.failed is not None)
    expiries = next(n for n in range(1, 100) if retries_exhausted(cfg, n))
    assert a.failed and f"{expiries} timeouts in a row" in a.failed, a.failed
    assert a.counters.timeouts == a.counters.packet_timeouts == expiries, a.counters
    assert a.counters.retransmits == 32 * (expiries - 1)
    assert end == pytest.approx(time_to_fail(cfg), abs=1e-6)


def test_mrc_counts_one_timeout_per_path_per_timer_pass():
    """MRC's timers are per packet: a window of 32 packets on its one path, the peer silent,
    expires together at each timer pass. `timeouts` counts the passes (one path each), as
    RoCEv2's counts its QP timer's expiries; `packet_timeouts` the packets."""
    cfg = QPConfig(mss=256, init_cwnd=8 * 1024, max_cwnd=32 * 1024, timeout=0.002,
                   linear_cnt=3, exp_cnt=2, base_rtt=REFERENCE_RTT)
    a, b, _ = one_path_pair(8 * 1024, cfg)
    net = SimNet(a, b, seed=6)
    net.paths[("b", 0)] = PathModel(dead=True)
    a.post_write(0, memoryview(bytes(8 * 1024)), 0, None, 0.0, peer=1)
    net.run(lambda: a.failed is not None)
    expiries = next(n for n in range(1, 100) if retries_exhausted(cfg, n))
    assert a.counters.timeouts == expiries, a.counters
    assert a.counters.packet_timeouts > 32 * (expiries - 1)


def test_ce_marked_packets_send_cnps_whatever_their_psn_at_most_one_per_interval():
    """Packet 0 is lost; 1..7 arrive CE-marked and out of order, within one CNP interval:
    the receiver drops them (one NACK) and sends one CNP. A marked packet an interval later
    sends the next; in-order marked packets within an interval send one between them. The
    sender cuts its rate at each CNP."""
    base_rtt = 0.001
    cfg = QPConfig(mss=256, max_cwnd=32 * 1024, timeout=T, base_rtt=base_rtt)
    a, b = pair(16 * 256, cfg)
    interval = b.cc.cfg.cnp_interval
    assert interval == pytest.approx(5 * base_rtt), "5 base RTTs (dcqcn.CONSTANTS)"
    a.post_write(0, memoryview(bytes(16 * 256)), 0, None, 0.0, peer=1)
    sent = send_all(a, 0.0)
    out = []
    for k, d in enumerate(sent[1:8]):
        b.receive(d, 0.001 + k * interval / 10, ecn=True)
        out += b.poll_transmit(0.001 + k * interval / 10)
    assert b.counters.dropped_out_of_order == 7
    assert cnps_in(out) == 1 and b.counters.cnps_sent == 1
    assert sum(1 for _, d in out if wire.decode(d)[0].type == wire.NACK) == 1
    b.receive(sent[8], 0.001 + 1.01 * interval, ecn=True)  # still out of order, an interval on
    later = b.poll_transmit(0.001 + 1.01 * interval)
    assert cnps_in(later) == 1
    for _, d in out + later:
        a.receive(d, 0.002 + 1.01 * interval)
    assert a.cc.cnps == a.cc.decreases == 2
    now = 0.001 + 2.5 * interval
    b.receive(sent[0], now, ecn=True)  # the hole fills: in order from here
    for d in sent[1:8]:
        b.receive(d, now, ecn=True)
    assert cnps_in(b.poll_transmit(now)) == 1 and b.counters.cnps_sent == 3
