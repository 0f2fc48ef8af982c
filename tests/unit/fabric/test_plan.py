"""The fabric plan: node names, uSIDs, links, ports and addresses, checked by hand."""
from __future__ import annotations

from ipaddress import IPv6Address, IPv6Interface, IPv6Network

import pytest

from testbed import scenario
from testbed.fabric.plan import IFINDEX_BASE, make_plan, sid_prefix, usid_address

REF64 = ("name: ref\nfabric: {planes: 4, leaves_per_plane: 8, spines_per_plane: 4, "
         "hosts_per_leaf: 8}\n")


@pytest.fixture(scope="module")
def plan():
    """The defaults: 2 planes x (2 leaves + 2 spines), 2 hosts per leaf, 4 hosts."""
    return make_plan(scenario.parse("name: q", "x"))


@pytest.fixture(scope="module")
def ref64():
    return make_plan(scenario.parse(REF64, "x"))


# ---- nodes -----------------------------------------------------------------------------------

def test_node_names_and_roles(plan):
    assert plan.hosts == ("h0", "h1", "h2", "h3")
    assert plan.leaves == (("p0l0", "p0l1"), ("p1l0", "p1l1"))
    assert plan.spines == (("p0s0", "p0s1"), ("p1s0", "p1s1"))
    assert set(plan.nodes) == {"h0", "h1", "h2", "h3", "p0l0", "p0l1", "p0s0", "p0s1",
                               "p1l0", "p1l1", "p1s0", "p1s1"}
    assert set(plan.routers) == set(plan.nodes) - set(plan.hosts)
    h3, p1l1, p0s1 = plan.nodes["h3"], plan.nodes["p1l1"], plan.nodes["p0s1"]
    assert (h3.role, h3.index, h3.plane) == ("host", 3, None)
    assert (p1l1.role, p1l1.index, p1l1.plane) == ("leaf", 1, 1)
    assert (p0s1.role, p0s1.index, p0s1.plane) == ("spine", 1, 0)


def test_usids(plan):
    expected = {"h0": 0x100, "h1": 0x101, "h2": 0x102, "h3": 0x103,
                "p0l0": 0xD000, "p0l1": 0xD001, "p0s0": 0xE000, "p0s1": 0xE001,
                "p1l0": 0xD100, "p1l1": 0xD101, "p1s0": 0xE100, "p1s1": 0xE101}
    assert {name: node.usid for name, node in plan.nodes.items()} == expected


def test_host_to_leaf(plan):
    assert [plan.leaf_index(h) for h in plan.hosts] == [0, 0, 1, 1]
    assert plan.leaf_of("h2", 1) == "p1l1"
    assert plan.hosts_of_leaf("p0l1") == ("h2", "h3")
    assert plan.hosts_of_leaf("p1l0") == ("h0", "h1")


# ---- links and ports -------------------------------------------------------------------------

# (lower node, lower ifname, upper node, upper ifname, plane, subnet k, kind), written by hand:
# host links plane-major (k = host index), then leaf-spine links (k = 4 + 2 x leaf + spine).
EXPECTED_LINKS = [
    ("h0", "h0-eth0", "p0l0", "p0l0-eth0", 0, 0, "host"),
    ("h1", "h1-eth0", "p0l0", "p0l0-eth1", 0, 1, "host"),
    ("h2", "h2-eth0", "p0l1", "p0l1-eth0", 0, 2, "host"),
    ("h3", "h3-eth0", "p0l1", "p0l1-eth1", 0, 3, "host"),
    ("h0", "h0-eth1", "p1l0", "p1l0-eth0", 1, 0, "host"),
    ("h1", "h1-eth1", "p1l0", "p1l0-eth1", 1, 1, "host"),
    ("h2", "h2-eth1", "p1l1", "p1l1-eth0", 1, 2, "host"),
    ("h3", "h3-eth1", "p1l1", "p1l1-eth1", 1, 3, "host"),
    ("p0l0", "p0l0-eth2", "p0s0", "p0s0-eth0", 0, 4, "fabric"),
    ("p0l0", "p0l0-eth3", "p0s1", "p0s1-eth0", 0, 5, "fabric"),
    ("p0l1", "p0l1-eth2", "p0s0", "p0s0-eth1", 0, 6, "fabric"),
    ("p0l1", "p0l1-eth3", "p0s1", "p0s1-eth1", 0, 7, "fabric"),
    ("p1l0", "p1l0-eth2", "p1s0", "p1s0-eth0", 1, 4, "fabric"),
    ("p1l0", "p1l0-eth3", "p1s1", "p1s1-eth0", 1, 5, "fabric"),
    ("p1l1", "p1l1-eth2", "p1s0", "p1s0-eth1", 1, 6, "fabric"),
    ("p1l1", "p1l1-eth3", "p1s1", "p1s1-eth1", 1, 7, "fabric"),
]


def test_link_list(plan):
    assert len(plan.links) == 16
    got = [(l.lower.node, l.lower.ifname, l.upper.node, l.upper.ifname, l.plane,
            int(l.lower.address.network.network_address) >> 80 & 0xFFFF, l.kind)
           for l in plan.links]
    assert got == EXPECTED_LINKS
    for link, (*_, plane, k, _kind) in zip(plan.links, EXPECTED_LINKS):
        assert link.lower.address == IPv6Interface(f"fd20:{plane}:{k}::1/64")
        assert link.upper.address == IPv6Interface(f"fd20:{plane}:{k}::2/64")
        assert link.lower.plane == link.upper.plane == plane
        assert (link.lower.peer, link.upper.peer) == (link.upper.node, link.lower.node)


def test_link_addresses(plan):
    first = plan.links[0]
    assert first.name == "h0-p0l0"
    assert (first.lower.ifname, first.lower.plane, first.lower.peer) == ("h0-eth0", 0, "p0l0")
    assert first.lower.address == IPv6Interface("fd20::1/64")
    assert first.upper.address == IPv6Interface("fd20::2/64")
    h3_p1 = plan.port_to("h3", "p1l1")
    assert h3_p1.address == IPv6Interface("fd20:1:3::1/64")
    assert plan.port_to("p1l1", "h3").address == IPv6Interface("fd20:1:3::2/64")
    up = plan.port_to("p0l0", "p0s0")
    assert (up.ifname, up.address) == ("p0l0-eth2", IPv6Interface("fd20:0:4::1/64"))
    down = plan.port_to("p0s0", "p0l0")
    assert (down.ifname, down.address) == ("p0s0-eth0", IPv6Interface("fd20:0:4::2/64"))
    assert plan.port_to("p1s1", "p1l1").address == IPv6Interface("fd20:1:7::2/64")


def test_link_rates_come_from_the_scenario():
    p = make_plan(scenario.parse("name: r\nfabric:\n  host_link: {rate: 1Gbit, buffer: 64KiB}\n"
                                 "  fabric_link: {rate: 10Gbit}\n", "x"))
    host = next(l for l in p.links if l.kind == "host")
    fabric = next(l for l in p.links if l.kind == "fabric")
    assert (host.rate, host.buffer) == (1_000_000_000, 65_536)
    assert (fabric.rate, fabric.buffer) == (10_000_000_000, 100_000)


def test_ports_in_order(plan):
    assert [p.ifname for p in plan.ports("h1")] == ["h1-eth0", "h1-eth1"]
    assert [p.plane for p in plan.ports("h1")] == [0, 1]  # host port p is plane p
    assert [p.peer for p in plan.ports("p0l1")] == ["h2", "h3", "p0s0", "p0s1"]
    assert [p.peer for p in plan.ports("p1s0")] == ["p1l0", "p1l1"]
    with pytest.raises(KeyError):
        plan.port_to("h0", "p0l1")


def test_link_by_ports(plan):
    link = plan.link_by_ports[("p0s1", "p0s1-eth1")]
    assert link.name == "p0l1-p0s1"
    assert plan.link_by_ports[("p0l1", "p0l1-eth3")] is link
    assert len(plan.link_by_ports) == 32


@pytest.mark.parametrize("fixture", ["plan", "ref64"])
def test_interface_names_unique_and_short(fixture, request):
    p = request.getfixturevalue(fixture)
    everywhere = []
    for node in p.nodes:
        names = [port.ifname for port in p.ports(node)]
        assert len(names) == len(set(names)), node
        assert all(name.startswith(node + "-eth") for name in names)
        assert all(len(name) <= 15 for name in names), names
        everywhere += names
    assert len(everywhere) == len(set(everywhere)) == 2 * len(p.links)


# ---- addresses -------------------------------------------------------------------------------

def test_usid_address():
    assert usid_address(0, [0xE000, 0xD001, 0x103]) == IPv6Address("fcbb:bb00:e000:d001:103::")
    assert usid_address(3, [0x101]) == IPv6Address("fcbb:bb03:101::")
    assert usid_address(15, [1, 2, 3, 4, 5, 6]) == IPv6Address("fcbb:bb0f:1:2:3:4:5:6")


@pytest.mark.parametrize("usids", [[], [1, 2, 3, 4, 5, 6, 7], [0], [0x10000], [-1]])
def test_usid_address_rejects(usids):
    with pytest.raises(ValueError):
        usid_address(0, usids)


def test_host_addresses(plan):
    assert plan.plain_address("h3", 1) == IPv6Address("fd10:1:1::103")
    assert plan.plain_address("h0", 0) == IPv6Address("fd10::100")
    assert plan.srv6_address("h3", 1) == IPv6Address("fcbb:bb01:103::")
    assert plan.srv6_address("h0", 0) == IPv6Address("fcbb:bb00:100::")
    assert plan.leaf_subnet(1, 1) == IPv6Network("fd10:1:1::/64")
    assert plan.plain_plane(1) == IPv6Network("fd10:1::/32")


def test_sid_prefixes(plan):
    assert plan.sid("p0s1", 0) == IPv6Network("fcbb:bb00:e001::/48")
    assert plan.sid("p1l0", 1) == IPv6Network("fcbb:bb01:d100::/48")
    assert plan.sid("h2", 1) == IPv6Network("fcbb:bb01:102::/48")
    assert sid_prefix(2, 0xD005) == IPv6Network("fcbb:bb02:d005::/48")
    assert plan.srv6_address("h2", 1) in plan.sid("h2", 1)


# ---- the reference shape ---------------------------------------------------------------------

def test_ref64_counts(ref64):
    assert len(ref64.hosts) == 64
    assert len(ref64.nodes) == 112  # 64 + 4 x (8 + 4): no two nodes share a name
    assert len(ref64.links) == 384  # 4 x (64 + 8 x 4)
    assert sum(l.kind == "host" for l in ref64.links) == 256
    assert ref64.nodes["h63"].usid == 0x13F
    assert ref64.nodes["p3l7"].usid == 0xD307
    assert ref64.nodes["p3s3"].usid == 0xE303
    assert ref64.leaf_of("h63", 3) == "p3l7"
    assert [p.ifname for p in ref64.ports("p3l7")][-1] == "p3l7-eth11"  # 8 hosts + 4 spines


def test_ref64_subnets_and_addresses_unique(ref64):
    subnets = [l.lower.address.network for l in ref64.links]
    assert len(set(subnets)) == 384
    assert all(l.upper.address.network == l.lower.address.network for l in ref64.links)
    ports = [port.address.ip for n in ref64.nodes for port in ref64.ports(n)]
    host = [f(h, p) for h in ref64.hosts for p in range(4)
            for f in (ref64.srv6_address, ref64.plain_address)]
    assert len(set(ports + host)) == len(ports) + len(host) == 2 * 384 + 2 * 256
    usids = [node.usid for node in ref64.nodes.values()]
    assert len(set(usids)) == 112
    sids = [ref64.sid(n, node.plane if node.plane is not None else 0)
            for n, node in ref64.nodes.items()]
    assert len(set(sids)) == 112


def test_interface_indexes_are_distinct_across_the_fabric(plan):
    """One eBPF map keyed by ifindex serves every router port: no two ports may share one."""
    indexes = [p.ifindex for name in plan.nodes for p in plan.ports(name)]
    assert len(indexes) == len(set(indexes)) == 2 * len(plan.links)
    assert min(indexes) >= IFINDEX_BASE


def test_links_carry_their_class_thresholds(plan):
    host = next(link for link in plan.links if link.kind == "host")
    cls = plan.scenario.fabric.host_link
    assert (host.ecn, host.trim) == (cls.ecn(), cls.trim())
