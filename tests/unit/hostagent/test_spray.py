"""Spraying over planes by what each one delivers, on the simnet with rated
ports: each plane's EVs share one `Link` (the plane's NIC port, or a congested port on its
paths). A plane whose port gives the QP less gets fewer of its packets, so the QP runs at the
sum of what the planes have left, not at twice its slowest plane; equal planes stay equal."""
from __future__ import annotations

import random

import pytest

from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import QPConfig, WriteDone

from .simnet import Link, SimNet

TABLE = [(i, i // 4) for i in range(8)]  # 8 EVs: 2 planes x 4 spines
RATE = 1_250_000.0  # bytes/s of a healthy port: 10 Mbit/s
BUFFER = 100_000  # bytes a port holds
DRAIN = BUFFER / RATE
# the ACK timeout and delay target a scenario derives from these ports (Scenario.timeout,
# Scenario.target_delay): a timeout outlasts two full queues
CFG = QPConfig(mss=1024, init_cwnd=16 * 1024, max_cwnd=256 * 1024, timeout=2 * DRAIN + 0.005,
               target_delay=DRAIN / 4)
WARMUP, SIZE = 1 << 20, 4 << 20  # bytes of the two writes: the window opens in the first


def plane_links(rates: tuple[float, float]) -> list[Link]:
    """One port per plane, marking above a fifth of its buffer and trimming above four
    fifths, as the fabric's ports do by default."""
    return [Link(rate, ecn_bytes=BUFFER / 5, trim_bytes=BUFFER * 4 / 5) for rate in rates]


def transfer(rates: tuple[float, float], seed: int = 0) -> tuple[float, list[int]]:
    """Two writes over two planes whose ports run at `rates`: (goodput of the second in
    bytes/s, data packets each plane's port carried for it)."""
    total = WARMUP + SIZE
    bufs = bytearray(total), bytearray(total)
    policy = EVPolicy(probe_interval=0.002)
    a = MrcQP(1, 2, memoryview(bufs[0]), CFG,
              EVSet.build(TABLE, policy, random.Random(seed)), seed)
    b = MrcQP(2, 1, memoryview(bufs[1]), CFG,
              EVSet.build(TABLE, policy, random.Random(seed + 1)), seed + 1)
    data = random.Random(seed).randbytes(total)
    a.post_write(0, memoryview(data)[:WARMUP], 0, None, 0.0, peer=1)
    a.post_write(1, memoryview(data)[WARMUP:], WARMUP, None, 0.0, peer=1)
    net = SimNet(a, b, seed=seed)
    links = plane_links(rates)
    for ev, plane in TABLE:
        net.path("a", ev).link = links[plane]

    def done(n: int) -> bool:
        return len([e for e in a.events if isinstance(e, WriteDone)]) == n
    start = net.run(lambda: done(1), until=20.0)
    before = [link.carried for link in links]
    end = net.run(lambda: done(2), until=60.0)
    assert bytes(bufs[1]) == data, "every byte landed"
    return SIZE / (end - start), [link.carried - n for link, n in zip(links, before)]


@pytest.mark.parametrize("slow", [0.5, 0.25])
def test_a_slower_plane_gets_fewer_packets_and_the_qp_gets_the_sum(slow):
    """Plane 0's port gives the QP `slow` of the line (a cross flow, a degraded port). Even
    packets per plane would cap the QP at 2 x slow x RATE; spraying by what each plane
    delivers approaches (1 + slow) x RATE, with plane 0 carrying about slow / (1 + slow)."""
    goodput, carried = transfer((slow * RATE, RATE))
    share = carried[0] / sum(carried)
    assert share < slow / (1 + slow) + 0.05, f"plane 0 carried {share:.2f} of the packets"
    assert goodput > 0.9 * (1 + slow) * RATE, (
        f"{goodput / RATE:.2f} x one port, against {1 + slow:.2f} the two have")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_planes_get_equal_shares(seed):
    """No plane is favoured when they are alike: within 3% of half each, and the QP fills
    both ports."""
    goodput, carried = transfer((RATE, RATE), seed)
    share = carried[0] / sum(carried)
    assert abs(share - 0.5) < 0.03, f"plane 0 carried {share:.3f} of the packets"
    assert goodput > 0.9 * 2 * RATE, f"{goodput / RATE:.2f} x one port, against 2"
