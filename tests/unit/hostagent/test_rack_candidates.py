"""MRC's RACK reads only the packets sent before the newest delivered one (the first few in the
QP's send order, and those of the same moment with a lower PSN) instead of the whole window
per ACK. It must find exactly what a scan of the whole window finds: the same losses, in the
same order, and the same next deadline."""
from __future__ import annotations

import copy
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import PACKET_OVERHEAD, QPConfig, QueuePair
from hostagent.protocol.recovery import TailRecovery, rack_wait

CFG = QPConfig(mss=256, init_cwnd=64 * 1024, max_cwnd=64 * 1024, timeout=0.05)
TABLE = [(0, 0), (1, 0), (2, 1)]


def whole_window_scan(qp: MrcQP, tail: TailRecovery, now: float) -> tuple[list[int],
                                                                          float | None]:
    """RACK as it was: every packet in flight offered to TailRecovery.lost (on a copy of the
    QP's RACK state)."""
    cc = qp.cc
    timeout = qp._timeout()
    wait = rack_wait(cc.srtt, cc.rttvar, qp.cfg.ack_delay, timeout)
    assert wait is not None
    waits = {}
    for ev in qp.evset.evs:
        own = rack_wait(ev.srtt, ev.rttvar, qp.cfg.ack_delay, timeout)
        waits[ev.index] = timeout if own is None else max(wait, own)
    queued = set(qp._resend)
    lost = tail.lost(((psn, p.sent_at, waits.get(p.ev, wait))
                         for psn, p in qp._inflight.items() if psn not in queued), now)
    return lost, tail.deadline


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_rack_finds_what_a_scan_of_the_whole_window_finds(data):
    qp = MrcQP(1, 2, memoryview(bytearray(1 << 16)), CFG,
               EVSet.build(TABLE, EVPolicy(), random.Random(1)), 1)
    qp.post_write(0, memoryview(bytes(40 * 256)), 0, None, 0.0, peer=2)
    now = 0.0
    for _ in range(data.draw(st.integers(1, 8), label="polls")):
        now += data.draw(st.sampled_from([0.0, 0.0005, 0.002, 0.01]), label="step")
        if qp._inflight:  # resends go first, so one moment holds resent and new packets
            for psn in data.draw(st.lists(st.sampled_from(sorted(qp._inflight)), max_size=3)):
                qp._resend_now(psn)
        qp.poll_transmit(now, data.draw(st.integers(0, 6), label="packets") *
                         (256 + PACKET_OVERHEAD))
    if len(qp._inflight) < 2:
        return
    newest = data.draw(st.sampled_from(sorted(qp._inflight)), label="delivered")
    p = qp._inflight[newest]
    QueuePair._ack_packet(qp, newest, now)  # delivered: out of the window
    qp.tail.rack_sent, qp.tail.rack_psn = p.sent_at, newest
    for psn in data.draw(st.lists(st.sampled_from(sorted(qp._inflight)), max_size=3)):
        qp._resend_now(psn)  # queued for resending: not RACK's to find
    qp.cc.srtt, qp.cc.rttvar = 0.001, 0.0002
    qp.evset.evs[0].srtt, qp.evset.evs[0].rttvar = 0.004, 0.001  # one EV waits longer
    now += data.draw(st.sampled_from([0.0, 0.002, 0.004, 0.008, 0.05]), label="later")
    want = whole_window_scan(qp, copy.copy(qp.tail), now)
    before = list(qp._resend)
    qp._rack(now)
    assert list(qp._resend)[len(before):] == [q for q in want[0] if q not in before]
    assert qp.counters.rack_losses == len(want[0])
    assert qp.tail.deadline == want[1]


_COPIES = st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.integers(0, 3))


@given(st.lists(_COPIES, min_size=1, max_size=12), st.lists(_COPIES, max_size=6))
def test_rack_keeps_the_newest_delivered_copy_and_finds_what_was_sent_before_it(
        delivered, outstanding):
    """Newest by send time, then by PSN among copies of one instant (the order of the
    (send time, PSN) tuples), as RACK defines it; lost: what was sent before it, once due."""
    tail = TailRecovery()
    for sent_at, psn in delivered:
        tail.delivered(sent_at, psn)
    assert (tail.rack_sent, tail.rack_psn) == max(delivered)
    lost = tail.lost([(psn, sent_at, 0.0) for sent_at, psn in outstanding], now=2.0)
    assert lost == [psn for sent_at, psn in outstanding if (sent_at, psn) < max(delivered)]
