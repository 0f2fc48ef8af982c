"""Routers' ECMP hash seed: from the scenario's seed where the kernel takes one, and on an
older kernel (no net.ipv4.fib_multipath_hash_seed, Linux < 6.11) none, so that the build does
not write a sysctl the kernel lacks."""
from __future__ import annotations

from testbed.emulation import network
from testbed.fabric.plan import make_plan
from testbed.kernel import features
from testbed.scenario import parse


def test_routers_are_seeded_only_where_the_kernel_has_the_sysctl(monkeypatch):
    plan = make_plan(parse("name: s\nseed: 7\n", "t"))
    leaf = plan.leaves[0][0]
    monkeypatch.setattr(features, "hash_seed_settable", lambda: True)
    seed = network.router_hash_seed(plan, leaf)
    assert seed == network.ecmp_hash_seed(7, leaf) and seed % 2 == 1
    assert "net.ipv4.fib_multipath_hash_seed" in network.node_sysctls(True, seed)
    assert network.router_hash_seed(plan, "h0") is None
    monkeypatch.setattr(features, "hash_seed_settable", lambda: False)
    assert network.router_hash_seed(plan, leaf) is None
    values = network.node_sysctls(True, None)
    assert "net.ipv4.fib_multipath_hash_seed" not in values
    assert values["net.ipv6.fib_multipath_hash_policy"] == 1  # the L4 hash all the same
