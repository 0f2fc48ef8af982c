"""QP numbers against the scenario's limits: the agents' QPN stride (hostagent/runtime/driver.py)
must cover every QP a valid scenario may ask for (testbed/scenario/limits.py). hostagent does not
import testbed (tests/unit/test_layers.py), so the two constants meet here."""
from __future__ import annotations

from hostagent.runtime import driver
from testbed.scenario import limits


def test_the_qpn_stride_covers_the_scenarios_largest_qps_per_peer():
    assert driver.QPS_PER_PEER_MAX >= limits.MAX_QPS_PER_PEER


def test_qp_numbers_are_distinct_and_paired_at_the_largest_fabric_and_qp_count():
    """A host demultiplexes every arrival by QP number alone: no two of its QPs may share
    one, and the number it puts in a header must be the one its peer gave that QP."""
    world, per_peer = limits.MAX_HOSTS, limits.MAX_QPS_PER_PEER
    for rank in (0, 1, world // 2, world - 1):
        numbers = set()
        for peer in range(world):
            if peer == rank:
                continue
            for k in range(per_peer):
                ours, theirs = driver.qpn(rank, peer, k)
                assert driver.qpn(peer, rank, k) == (theirs, ours)
                assert 0 <= ours <= 0xFFFFFFFF  # the header's 32-bit `qp` field
                numbers.add(ours)
        assert len(numbers) == (world - 1) * per_peer
