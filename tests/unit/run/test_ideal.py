"""The ideal iteration with latency: worked out by hand on a 4-host fabric of 2 leaves, where
the ring h0 -> h1 -> h2 -> h3 -> h0 alternates a same-leaf hop (2 links) and a cross-spine one
(4 links)."""
from __future__ import annotations

import pytest

from testbed import scenario
from testbed.fabric.plan import make_plan
from testbed.run.ideal import ideal_iteration

# D = 100 Gbit/s / 10 Mbit/s = 10,000: a 1 us hop is 10 ms emulated, a 0.5 us NIC 5 ms
REAL = ("fabric: {host_link: {rate: 10Mbit}, fabric_link: {rate: 10Mbit}, mtu: 4200, "
        "real_rate: 100Gbit, hop_latency: 1us, nic_latency: 0.5us}\nqp: {mss: 4096}\n")
PACKET = (4096 + 40 + 62) * 8 / 10e6  # a full packet's store-and-forward on one link, s
BLOCK = 2**20 / 4 * 8 / 20e6  # a quarter of 1 MiB at 2 planes x 10 Mbit/s, s
SAME = 2 * 0.010 + 2 * 0.005 + 1 * PACKET  # 2 links, 2 NICs, forwarded once
CROSS = 4 * 0.010 + 2 * 0.005 + 3 * PACKET  # 4 links, 2 NICs, forwarded 3 times


def plan(workload: str, fabric: str = REAL):
    return make_plan(scenario.parse(f"name: t\n{fabric}workload: {workload}\n", "t"))


def test_ring_all_reduce_waits_for_each_block_along_the_chain_of_neighbours():
    """6 steps: whichever rank ends last, its chain crossed 3 same-leaf and 3 cross-spine
    hops, each after a block's serialization."""
    got = ideal_iteration(plan("{collective: all_reduce, size: 1MiB}"), "mrc")
    assert got is not None and got.steps == 6
    assert got.serialization == pytest.approx(6 * BLOCK)
    assert got.seconds == pytest.approx(6 * BLOCK + 3 * SAME + 3 * CROSS)


def test_all_gather_has_half_the_steps_and_all_to_all_one():
    gather = ideal_iteration(plan("{collective: all_gather, size: 1MiB}"), "mrc")
    assert gather is not None and gather.steps == 3
    # 3 steps ending at h0 or h2 cross same, cross, same (into h3... h0): the longest chain
    assert gather.seconds == pytest.approx(3 * BLOCK + SAME + 2 * CROSS)
    a2a = ideal_iteration(plan("{collective: all_to_all, size: 1MiB}"), "mrc")
    assert a2a is not None
    assert a2a.seconds == pytest.approx(3 * BLOCK + CROSS)


def test_rocev2_on_one_qp_gets_one_planes_rate():
    fabric = REAL.replace("qp: {mss: 4096}", "qp: {mss: 4096, qps_per_peer: {rocev2: 1}}")
    got = ideal_iteration(plan("{collective: all_reduce, size: 1MiB}", fabric), "rocev2")
    assert got is not None and got.serialization == pytest.approx(12 * BLOCK)


def test_without_latency_only_the_forwarding_is_added_to_the_bytes():
    fabric = REAL.replace(", real_rate: 100Gbit, hop_latency: 1us, nic_latency: 0.5us", "")
    got = ideal_iteration(plan("{collective: all_reduce, size: 1MiB}", fabric), "mrc")
    assert got is not None
    assert got.latency == pytest.approx(3 * PACKET + 3 * 3 * PACKET)
