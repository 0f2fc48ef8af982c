"""MRC's PSN range and what a loss that was not trimmed does to its EV: no new PSN goes out
`mpr` x 128 PSNs past the cumulative ACK; one random loss on a path that delivers later packets
condemns nothing by default (it does not stand out from the other EVs), while `untrimmed_loss:
condemn` condemns its EV at once. Both find the loss by gap NACK, long before the timeout."""
from __future__ import annotations

import dataclasses
import random

from hostagent.protocol import wire
from hostagent.protocol.constants import MPR_UNIT
from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import WriteDone

from .simnet import SimNet
from .test_mrc_signals import ack
from .test_transport import CFG, TABLE, events, layout, mrc_pair, post_all

# a window far wider than the PSN range, so that only the range can stop the sender
WIDE = dataclasses.replace(CFG, init_cwnd=1000 * CFG.mss, max_cwnd=1000 * CFG.mss, mpr=1)


def test_no_new_psn_goes_past_the_range_from_the_cumulative_ack():
    """With mpr 1 the first burst stops at 128 PSNs though the window allows 1,000; an ACK
    that moves the cumulative PSN to 10 lets exactly 10 more go."""
    evset = EVSet.build(TABLE, EVPolicy(probe_interval=0.002), random.Random(0))
    a = MrcQP(1, 2, memoryview(bytearray(1 << 20)), WIDE, evset, 0)
    a.post_write(0, memoryview(bytes(1000 * WIDE.mss)), 0, None, 0.0, peer=2)
    first = a.poll_transmit(0.0)
    assert len(first) == MPR_UNIT
    h, _ = wire.decode(first[9][1])
    a.receive(ack(10, 9, h.ev, 0.0), 0.001)
    more = [wire.decode(d)[0].psn for _, d in a.poll_transmit(0.001)]
    assert more == list(range(MPR_UNIT, MPR_UNIT + 10))


def run_with_one_loss(policy: EVPolicy) -> tuple[MrcQP, MrcQP, float, int]:
    """A 256-packet write whose PSN 5 loses its first copy: (sender, receiver, when the
    write completed, the EV the copy was lost on)."""
    writes, total = layout([256 * CFG.mss], seed=4)
    a, b, bufs = mrc_pair(total, seed=4, policy=policy)
    post_all(a, writes)
    net = SimNet(a, b, seed=4)
    lost = net.lose(lambda side, h, n: side == "a" and h.type == wire.DATA and h.psn == 5
                    and n == 0)
    net.run(lambda: len(events(a, WriteDone)) == 1)
    assert bytes(bufs[1]) == writes[0][0]
    return a, b, net.now, lost[0]


def test_by_default_one_random_loss_condemns_nothing():
    a, b, done, ev = run_with_one_loss(EVPolicy(probe_interval=0.002))
    assert b.counters.nacks_sent == 1 and a.counters.timeouts == 0
    assert done < CFG.timeout
    e = a.evset.by_index(ev)
    assert (e.condemned, e.random_losses) == (0, 1)


def test_condemn_takes_the_ev_of_every_untrimmed_loss_out_at_once():
    a, b, done, ev = run_with_one_loss(EVPolicy(probe_interval=0.002, untrimmed_loss="condemn"))
    assert b.counters.nacks_sent == 1 and a.counters.timeouts == 0
    assert done < CFG.timeout
    e = a.evset.by_index(ev)
    assert (e.condemned, e.random_losses) == (1, 0)
