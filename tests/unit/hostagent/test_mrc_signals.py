"""What MRC reads from its signals, packet by packet: every lost copy of a PSN is gap-NACKed,
each timeout in a timer pass is excused by its own EV's congestion only, and an EV's RTT
samples come only from the copies ACKs answer, each copy at most once; and the probes of a
condemned path slower than the probe interval's multiple are waited for."""
from __future__ import annotations

import random

from hostagent.protocol import wire
from hostagent.protocol.evs import EVPolicy, EVSet, EVState
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import QPConfig, WriteDone, us_clock

from .simnet import PathModel, SimNet
from .test_transport import CFG, TABLE, events, layout, mrc_pair, post_all


def sender(cfg: QPConfig = CFG) -> MrcQP:
    evset = EVSet.build(TABLE, EVPolicy(probe_interval=0.002), random.Random(0))
    return MrcQP(1, 2, memoryview(bytearray(1 << 16)), cfg, evset, 0)


def ack(cum: int, trigger: int, ev: int, sent: float, sack: int = 0, base: int = 0) -> bytes:
    """An ACK as the receiver builds it: cumulative PSN, SACK bitmap from `base`, and the
    echo of the copy that triggered it (its PSN, EV and send time)."""
    return wire.control_datagram(wire.ACK, 0, ev, 1, cum, sack, trigger, base, us_clock(sent))


def test_a_resent_packet_lost_again_is_gap_nacked_again():
    """PSN 5 is lost on its EV, NACKed and resent elsewhere, and its resend is lost too: the
    packet after the resend on that EV names it, so the receiver NACKs it again at once. Both
    losses are recovered by gap NACKs: no RACK loss, no timeout."""
    writes, total = layout([64 * 256], seed=3)
    a, b, bufs = mrc_pair(total, seed=3)
    post_all(a, writes)
    net = SimNet(a, b, seed=3)
    copies = net.lose(lambda side, h, n: side == "a" and h.type == wire.DATA and h.psn == 5
                      and n < 2)
    net.run(lambda: len(events(a, WriteDone)) == 1)
    assert bytes(bufs[1]) == writes[0][0]
    assert len(copies) == 2 and copies[0] != copies[1], copies
    assert b.counters.nacks_sent == 2
    assert (a.counters.rack_losses, a.counters.timeouts, a.counters.retransmits) == (0, 0, 2)


def test_each_timeout_of_a_pass_is_excused_by_its_own_evs_queue_only():
    """Two packets time out in one timer pass: one on an EV whose own RTT shows a queue
    (3 x the delay target above the base RTT), one on a silent EV with no queue. The queue
    excuses its own EV (held off, GOOD), not the other: the silent path is condemned."""
    a = sender()
    a.post_write(0, memoryview(bytes(2 * CFG.mss)), 0, None, 0.0, peer=2)
    queued, dead = (ev for ev, _ in a.poll_transmit(0.0))
    base = 0.001
    a.cc.base_rtt = base
    a.evset.on_rtt(queued, base + 3 * CFG.target_delay)
    a.evset.on_rtt(dead, base)
    a.on_timer(CFG.timeout)
    assert a.counters.timeouts == 2
    q, d = a.evset.by_index(queued), a.evset.by_index(dead)
    assert q.state is EVState.GOOD and q.congestion_losses == 1
    assert d.state is EVState.ASSUMED_BAD and d.congestion_losses == 0


def test_a_cumulative_ack_after_a_repaired_hole_samples_only_the_copy_it_answers():
    """PSN 0 is lost and resent 9 ms later; the ACK its resend triggers 1 ms after that
    acknowledges all 8 packets cumulatively. Its echo names the resend: one RTT sample of
    1 ms on the resend's EV. The 7 packets it acknowledges behind the hole arrived long
    before: 10 ms since their send is the hole's repair time, not their path's RTT."""
    a = sender()
    a.post_write(0, memoryview(bytes(8 * CFG.mss)), 0, None, 0.0, peer=2)
    first = a.poll_transmit(0.0)
    assert len(first) == 8
    a._resend_now(0)
    (resent_on, _), = a.poll_transmit(0.009)
    a.receive(ack(8, 0, resent_on, 0.009), 0.010)
    assert not a._inflight
    sampled = {e.index: e.srtt for e in a.evset.evs if e.rtt_samples}
    assert sampled.keys() == {resent_on}
    assert abs(sampled[resent_on] - 0.001) < 2e-6


def test_reordered_acks_sample_each_copy_at_most_once():
    """Two packets on two EVs; the ACK of the second (SACKing both) overtakes the ACK of the
    first. The first packet's EV gets at most one sample, the second's exactly one."""
    a = sender()
    a.post_write(0, memoryview(bytes(2 * CFG.mss)), 0, None, 0.0, peer=2)
    (ev0, _), (ev1, _) = a.poll_transmit(0.0)
    a.receive(ack(2, 1, ev1, 0.0), 0.001)
    a.receive(ack(1, 0, ev0, 0.0), 0.0012)
    assert a.evset.by_index(ev1).rtt_samples == 1
    assert a.evset.by_index(ev0).rtt_samples <= 1


def test_a_condemned_path_slower_than_the_fixed_probe_timeout_comes_back():
    """EV 3 answers in 30 ms (15 ms each way), the others in 2 ms; probes every 5 ms, so 4
    intervals are 20 ms. Condemned before it carried anything (no RTT of its own), it comes
    back once RUN probes are answered: within 2 RTTs + RUN probe intervals."""
    run = 16
    policy = EVPolicy(probe_interval=0.005, probe_successes=run)
    writes, total = layout([400 * 256], seed=5)
    a, b, bufs = mrc_pair(total, seed=5, policy=policy)
    net = SimNet(a, b, seed=5)
    for side in ("a", "b"):
        for ev in range(8):
            net.paths[(side, ev)] = PathModel(latency=0.001, jitter=0.0)
        net.paths[(side, 3)] = PathModel(latency=0.015, jitter=0.0)
    a.evset.on_loss(3, 0.0, "condemned at the start")
    post_all(a, writes)
    net.run(lambda: a.evset.by_index(3).state is EVState.GOOD, until=1.0)
    ev3 = a.evset.by_index(3)
    assert ev3.state is EVState.GOOD, (ev3.probes_sent, ev3.probes_answered)
    assert net.now <= 2 * 0.030 + run * 0.005, net.now


def test_a_packet_resent_on_its_own_ev_is_not_nacked_by_its_own_resend():
    """One path only: the last packet of a write is lost, and its tail probe goes out on the
    same EV with nothing sent there since, naming that PSN as the one before it. That is no
    gap: the resend lands, nothing is NACKed or resent twice."""
    size = 8 * 256
    bufs = bytearray(size), bytearray(size)
    one = [(0, 0)]
    a = MrcQP(1, 2, memoryview(bufs[0]), CFG, EVSet.build(one, EVPolicy(), random.Random(0)), 0)
    b = MrcQP(2, 1, memoryview(bufs[1]), CFG, EVSet.build(one, EVPolicy(), random.Random(1)), 1)
    data = random.Random(7).randbytes(size)
    a.post_write(0, memoryview(data), 0, None, 0.0, peer=1)
    net = SimNet(a, b, seed=7)
    lost: list[int] = []
    send = net._send

    def lose_the_last(side: str, ev: int, datagram: bytes) -> None:
        h, _ = wire.decode(datagram)
        if side == "a" and h.type == wire.DATA and h.psn == 7 and not lost:
            lost.append(h.psn)
            return
        send(side, ev, datagram)
    net._send = lose_the_last
    net.run(lambda: len(events(a, WriteDone)) == 1)
    assert bytes(bufs[1]) == data and lost == [7]
    assert (b.counters.nacks_sent, b.counters.duplicates, a.counters.retransmits) == (0, 0, 1)
