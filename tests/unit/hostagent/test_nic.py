"""The NIC's transmit pacing: QPs hand the kernel no more than their ports can send."""
from __future__ import annotations

import pytest

from hostagent.protocol import wire
from hostagent.protocol.dcqcn import DcqcnCC
from hostagent.protocol.nic import FRAME_OVERHEAD, RESERVE_S, Nic, Port
from hostagent.protocol.qp import QPConfig

from .test_transport import mrc_pair, post_all, roce_pair

RATE = 8_000_000  # 1 MB/s: one byte per microsecond


def test_port_drains_at_its_rate():
    port = Port(RATE, limit=10_000)
    port.sent(10_000, now=0.0)
    assert port.room(0.0) == 0
    assert port.room(0.004) == pytest.approx(4_000)
    assert port.wait(4_000, now=0.004) == pytest.approx(0.0)
    assert port.wait(6_000, now=0.004) == pytest.approx(0.002)
    assert port.room(1.0) == 10_000, "an idle port is empty, never negative"


def test_a_spraying_qp_gets_its_fullest_port_once_per_plane():
    nic = Nic(planes=2, rate_bps=RATE, limit=10_000)
    nic.sent(0, 6_000 - FRAME_OVERHEAD, now=0.0)
    assert nic.budget((1,), 0.0) == 10_000
    assert nic.budget((0, 1), 0.0) == 2 * 4_000
    assert nic.wait((0, 1), 5_000 - FRAME_OVERHEAD, 0.0) == pytest.approx(0.001)


PACKET = 4096 + wire.HEADER_SIZE + FRAME_OVERHEAD


@pytest.mark.parametrize("rate_bps, limit, room", [
    (2_000_000, 4 * PACKET, 3 * PACKET),  # 16.6 ms a packet: keep one queued, wake for three
    (5_000_000, 4 * PACKET, 4 * PACKET - 5_000),  # 8 ms of 5 Mbit/s: 5,000 B kept
    (10_000_000, 4 * PACKET, 4 * PACKET - 10_000),  # 8 ms: 10,000 B kept, 1.6 packets of room
    (100_000_000, 50_000, PACKET),  # the limit is 4 ms of the line: as before, a packet
])
def test_a_blocked_qp_wakes_when_its_ports_hold_just_their_reserve(rate_bps, limit, room):
    """Woken, a QP finds `room` on each port: the port still holds RESERVE_S of the line (at
    least a packet), so it is not dry while the agent runs, and the QP is not woken later than
    that (a port emptier than needed, for nothing), nor for less than its packet."""
    assert RESERVE_S == 0.008  # the rooms above are worked out for 8 ms
    nic = Nic(planes=2, rate_bps=rate_bps, limit=limit)
    for plane in (0, 1):
        nic.sent(plane, limit - FRAME_OVERHEAD, now=0.0)  # both ports full
    woken = nic.wake((0, 1), PACKET - FRAME_OVERHEAD, now=0.0)
    assert woken > 0
    assert nic.budget((0, 1), woken) == pytest.approx(2 * room, abs=2)
    assert nic.wake((0, 1), PACKET - FRAME_OVERHEAD, now=woken) == pytest.approx(0.0)


@pytest.mark.parametrize("pair", [mrc_pair, roce_pair])
def test_qp_sends_no_more_data_than_the_budget_and_keeps_the_rest(pair):
    a, _, _ = pair(64 * 1024)
    post_all(a, [(bytes(16 * 1024), 0, None)])
    cfg: QPConfig = a.cfg
    packet = cfg.mss + wire.HEADER_SIZE + FRAME_OVERHEAD
    out = a.poll_transmit(0.0, budget=3.5 * packet)
    data = [d for _, d in out if d[1] == wire.DATA]
    assert len(data) == 3 and a.nic_blocked
    assert a.next_deadline() is not None, "what was sent is timed"
    out = a.poll_transmit(0.001, budget=None)
    # now the congestion control is the limit: NSCC's window, or DCQCN's rate (a burst of
    # `burst` packets at one instant)
    limit = a.cc.cfg.burst if isinstance(a.cc, DcqcnCC) else cfg.init_cwnd // cfg.mss - 3
    assert len([d for _, d in out if d[1] == wire.DATA]) == limit
    assert not a.nic_blocked


def test_datagrams_reported_together_count_as_reported_one_by_one():
    """The driver reports a kick's datagrams per port at once: each still pays its frame."""
    from hostagent.protocol.nic import Nic
    one, many = Nic(2, 8_000_000, 100_000), Nic(2, 8_000_000, 100_000)
    for size in (1064, 1064, 500):
        one.sent(1, size, 0.0)
    many.sent(1, 1064 + 1064 + 500, 0.0, 3)
    assert one.ports[1].backlog == many.ports[1].backlog > 2628
    assert one.budget((1,), 0.001) == many.budget((1,), 0.001)
