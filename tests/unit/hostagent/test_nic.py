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


@pytest.mark.parametrize("rate_bps, limit, packets_per_wake", [
    (2_000_000, 4 * PACKET, 3),  # 16.6 ms a packet: keep one queued, wake for the other three
    (5_000_000, 4 * PACKET, 2),  # 6.7 ms a packet: 8 ms is 1.2 packets, so two whole ones
    (10_000_000, 4 * PACKET, 1),  # 3.3 ms a packet: 8 ms is 2.4 packets: one, as before
    (100_000_000, 50_000, 1),  # the limit is 4 ms of the line: as before, a packet at a time
])
def test_a_blocked_qp_wakes_for_several_packets_only_where_the_port_keeps_its_reserve(
        rate_bps, limit, packets_per_wake):
    """Woken, a QP finds room for `packets_per_wake` whole packets per port, and the port still
    holds at least RESERVE_S of the line or a packet, so it is not dry while the agent runs;
    it is not woken later than those packets fit (a port emptier than needed, for nothing)."""
    nic = Nic(planes=2, rate_bps=rate_bps, limit=limit)
    for plane in (0, 1):
        nic.sent(plane, limit - FRAME_OVERHEAD, now=0.0)  # both ports full
    woken = nic.wake((0, 1), PACKET - FRAME_OVERHEAD, now=0.0)
    assert woken > 0
    room = nic.budget((0, 1), woken) / 2
    assert room == pytest.approx(packets_per_wake * PACKET)
    queued_s = nic.ports[0].backlog / (rate_bps / 8)
    assert queued_s >= min(RESERVE_S, PACKET / (rate_bps / 8)) - 1e-9
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
