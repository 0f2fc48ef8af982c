"""Route tables, proven by forwarding packets through them in a small pure-Python model.

The model is a longest-prefix-match forwarder over `node_configs(plan)`: at node N with
destination D, D equal to one of N's addresses is delivered; else the longest prefix among N's
End SIDs and routes that contains D decides: an End SID shifts D by one uSID (NEXT-C-SID) and
N looks D up again; a route hands the packet to the neighbour that owns the next-hop gateway.
"""
from __future__ import annotations

from ipaddress import IPv6Address, IPv6Network

import pytest

from testbed import scenario
from testbed.fabric.paths import all_evs, ev_count
from testbed.fabric.plan import make_plan
from testbed.fabric.routes import NodeConfig, Route, node_config, node_configs

SHAPES = {
    "quickstart": "name: q",
    "3p3l2s2h": "name: t\nfabric: {planes: 3, leaves_per_plane: 3, spines_per_plane: 2, "
                "hosts_per_leaf: 2}",
}

ARG_BITS = 96  # everything after the 32-bit uSID block
ARG_MASK = (1 << ARG_BITS) - 1
MAX_STEPS = 32


def next_csid(dst: IPv6Address) -> IPv6Address:
    """Drop the active uSID (the 16 bits after the block), shift the rest up, zero-fill."""
    value = int(dst)
    return IPv6Address((value & ~ARG_MASK) | ((value << 16) & ARG_MASK))


class Fabric:
    def __init__(self, plan):
        self.plan = plan
        self.configs = node_configs(plan)
        self.owner: dict[IPv6Address, str] = {}
        for name, cfg in self.configs.items():
            for _, iface in cfg.addresses:
                assert iface.ip not in self.owner, (
                    f"{iface.ip} on {self.owner.get(iface.ip)} and {name}")
                self.owner[iface.ip] = name

    def lookup(self, node: str, dst: IPv6Address) -> tuple[str, IPv6Network, Route | None]:
        cfg = self.configs[node]
        table = [("end", net, None) for net in cfg.end_sids]
        table += [("route", r.dst, r) for r in cfg.routes]
        matches = [entry for entry in table if dst in entry[1]]
        assert matches, f"{node} has no route to {dst}"
        longest = max(net.prefixlen for _, net, _ in matches)
        best = [entry for entry in matches if entry[1].prefixlen == longest]
        assert len(best) == 1, f"{node}: ambiguous entries for {dst}: {best}"
        return best[0]

    def neighbour(self, node: str, gateway: IPv6Address, ifname: str) -> str:
        """The node owning `gateway`, which must sit on the subnet of `node`'s port `ifname`."""
        on_port = [iface for name, iface in self.configs[node].addresses if name == ifname]
        assert any(gateway in iface.network and iface.network.prefixlen < 128
                   for iface in on_port), f"{node}: gateway {gateway} is not on {ifname}"
        peer = self.owner[gateway]
        assert self.plan.port_to(node, peer).ifname == ifname
        return peer

    def forward(self, src: str, dst: IPv6Address, choose=lambda nexthops: nexthops[0]):
        """(hops, final destination) of a packet sent by `src`; `choose` picks among ECMP."""
        hops, node = [src], src
        for _ in range(MAX_STEPS):
            if dst in {iface.ip for _, iface in self.configs[node].addresses} and node != src:
                return tuple(hops), dst
            kind, _, route = self.lookup(node, dst)
            if kind == "end":
                dst = next_csid(dst)
                continue
            hop = choose(route.nexthops)
            node = self.neighbour(node, hop.gateway, hop.ifname)
            hops.append(node)
        raise AssertionError(f"loop: {src} -> {dst} went {hops}")

    def all_plain_paths(self, src: str, dst: IPv6Address) -> set[tuple[str, ...]]:
        """Every path through every ECMP branch (depth-first)."""
        paths = set()

        def walk(hops: list[str]) -> None:
            node = hops[-1]
            assert len(hops) < MAX_STEPS, f"loop: {hops}"
            if node != src and dst in {iface.ip for _, iface in self.configs[node].addresses}:
                paths.add(tuple(hops))
                return
            kind, _, route = self.lookup(node, dst)
            assert kind == "route" and route.kind == "plain", f"{node}: {dst} hit {kind} {route}"
            for hop in route.nexthops:
                walk(hops + [self.neighbour(node, hop.gateway, hop.ifname)])

        walk([src])
        return paths


@pytest.fixture(scope="module", params=list(SHAPES))
def fabric(request):
    return Fabric(make_plan(scenario.parse(SHAPES[request.param], "x")))


@pytest.fixture(scope="module")
def quick():
    return Fabric(make_plan(scenario.parse("name: q", "x")))


# ---- the model itself ------------------------------------------------------------------------

def test_next_csid_shifts_one_usid():
    assert (next_csid(IPv6Address("fcbb:bb00:e000:d001:103::")) ==
            IPv6Address("fcbb:bb00:d001:103::"))
    assert next_csid(IPv6Address("fcbb:bb01:d101:103::")) == IPv6Address("fcbb:bb01:103::")
    assert next_csid(IPv6Address("fcbb:bb0f:1:2:3:4:5:6")) == IPv6Address("fcbb:bb0f:2:3:4:5:6:0")


# ---- SRv6: every EV is delivered on its own path ---------------------------------------------

def test_every_ev_is_delivered_on_its_path(fabric):
    plan = fabric.plan
    checked = 0
    for e in all_evs(plan):
        hops, final = fabric.forward(e.src, e.address)
        assert hops == e.hops, f"{e.label} {e.src}->{e.dst}: went {hops}, planned {e.hops}"
        assert final == plan.srv6_address(e.dst, e.plane)
        checked += 1
    assert checked == ev_count(plan)


def test_one_ev_by_hand(quick):
    hops, final = quick.forward("h0", IPv6Address("fcbb:bb01:e101:d101:103::"))
    assert hops == ("h0", "p1l0", "p1s1", "p1l1", "h3")
    assert final == IPv6Address("fcbb:bb01:103::")
    hops, final = quick.forward("h1", IPv6Address("fcbb:bb00:d000:100::"))
    assert hops == ("h1", "p0l0", "h0")
    assert final == IPv6Address("fcbb:bb00:100::")


def test_bare_srv6_address_only_reaches_the_same_leaf(quick):
    """Unsteered, a host's SRv6 address is known only to its own leaf: MRC must always steer."""
    hops, _ = quick.forward("h0", IPv6Address("fcbb:bb00:101::"))
    assert hops == ("h0", "p0l0", "h1")
    with pytest.raises(AssertionError, match="p0l0 has no route to fcbb:bb00:103::"):
        quick.forward("h0", IPv6Address("fcbb:bb00:103::"))


# ---- plain routes: ECMP reaches every host on every plane ------------------------------------

def test_plain_routes_reach_every_host(fabric):
    plan = fabric.plan
    for src in plan.hosts:
        for dst in plan.hosts:
            if src == dst:
                continue
            for p in range(plan.planes):
                src_leaf, dst_leaf = plan.leaf_of(src, p), plan.leaf_of(dst, p)
                if src_leaf == dst_leaf:
                    expected = {(src, src_leaf, dst)}
                else:
                    expected = {(src, src_leaf, spine, dst_leaf, dst) for spine in plan.spines[p]}
                got = fabric.all_plain_paths(src, plan.plain_address(dst, p))
                assert got == expected, f"{src}->{dst} plane {p}"


def test_plain_paths_by_hand(quick):
    assert quick.all_plain_paths("h0", IPv6Address("fd10:1:1::103")) == {
        ("h0", "p1l0", "p1s0", "p1l1", "h3"), ("h0", "p1l0", "p1s1", "p1l1", "h3")}
    assert quick.all_plain_paths("h2", IPv6Address("fd10::101")) == {
        ("h2", "p0l1", "p0s0", "p0l0", "h1"), ("h2", "p0l1", "p0s1", "p0l0", "h1")}
    assert quick.all_plain_paths("h3", IPv6Address("fd10:0:1::102")) == {("h3", "p0l1", "h2")}


# ---- the tables, by hand ---------------------------------------------------------------------

def nh(route: Route) -> list[tuple[str, str]]:
    return [(str(h.gateway), h.ifname) for h in route.nexthops]


def table(cfg: NodeConfig) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    out = {str(r.dst): (r.kind, nh(r)) for r in cfg.routes}
    assert len(out) == len(cfg.routes), f"{cfg.name}: a prefix appears twice"
    return out


def test_host_config(quick):
    cfg = node_config(quick.plan, "h1")
    assert not cfg.router
    assert [(i, str(a)) for i, a in cfg.addresses] == [
        ("h1-eth0", "fd20:0:1::1/64"), ("h1-eth1", "fd20:1:1::1/64"),
        ("h1-eth0", "fcbb:bb00:101::/128"), ("h1-eth0", "fd10::101/128"),
        ("h1-eth1", "fcbb:bb01:101::/128"), ("h1-eth1", "fd10:1::101/128")]
    assert table(cfg) == {
        "fcbb:bb00::/32": ("srv6", [("fd20:0:1::2", "h1-eth0")]),
        "fd10::/32": ("plain", [("fd20:0:1::2", "h1-eth0")]),
        "fcbb:bb01::/32": ("srv6", [("fd20:1:1::2", "h1-eth1")]),
        "fd10:1::/32": ("plain", [("fd20:1:1::2", "h1-eth1")]),
    }
    # MRC's one unbound socket: each plane's uSID route names the plane's own uSID address as
    # the source, the one the kernel's per-datagram choice (longest match) would pick
    assert {str(r.dst): str(r.source) for r in cfg.routes if r.source is not None} == {
        "fcbb:bb00::/32": "fcbb:bb00:101::", "fcbb:bb01::/32": "fcbb:bb01:101::"}
    assert cfg.end_sids == (IPv6Network("fcbb:bb00:101::/48"), IPv6Network("fcbb:bb01:101::/48"))


def test_leaf_config(quick):
    cfg = node_config(quick.plan, "p0l1")
    assert cfg.router
    assert [(i, str(a)) for i, a in cfg.addresses] == [
        ("p0l1-eth0", "fd20:0:2::2/64"), ("p0l1-eth1", "fd20:0:3::2/64"),
        ("p0l1-eth2", "fd20:0:6::1/64"), ("p0l1-eth3", "fd20:0:7::1/64")]
    assert table(cfg) == {
        "fcbb:bb00:e000::/48": ("srv6", [("fd20:0:6::2", "p0l1-eth2")]),
        "fcbb:bb00:e001::/48": ("srv6", [("fd20:0:7::2", "p0l1-eth3")]),
        "fcbb:bb00:102::/48": ("srv6", [("fd20:0:2::1", "p0l1-eth0")]),
        "fd10:0:1::102/128": ("plain", [("fd20:0:2::1", "p0l1-eth0")]),
        "fcbb:bb00:103::/48": ("srv6", [("fd20:0:3::1", "p0l1-eth1")]),
        "fd10:0:1::103/128": ("plain", [("fd20:0:3::1", "p0l1-eth1")]),
        "fd10::/64": ("plain", [("fd20:0:6::2", "p0l1-eth2"), ("fd20:0:7::2", "p0l1-eth3")]),
    }
    assert cfg.end_sids == (IPv6Network("fcbb:bb00:d001::/48"),)


def test_spine_config(quick):
    cfg = node_config(quick.plan, "p1s0")
    assert [(i, str(a)) for i, a in cfg.addresses] == [
        ("p1s0-eth0", "fd20:1:4::2/64"), ("p1s0-eth1", "fd20:1:6::2/64")]
    assert table(cfg) == {
        "fcbb:bb01:d100::/48": ("srv6", [("fd20:1:4::1", "p1s0-eth0")]),
        "fd10:1::/64": ("plain", [("fd20:1:4::1", "p1s0-eth0")]),
        "fcbb:bb01:d101::/48": ("srv6", [("fd20:1:6::1", "p1s0-eth1")]),
        "fd10:1:1::/64": ("plain", [("fd20:1:6::1", "p1s0-eth1")]),
    }
    assert cfg.end_sids == (IPv6Network("fcbb:bb01:e100::/48"),)


def test_srv6_and_plain_prefixes_never_overlap(fabric):
    for cfg in fabric.configs.values():
        srv6 = [r.dst for r in cfg.routes if r.kind == "srv6"] + list(cfg.end_sids)
        plain = [r.dst for r in cfg.routes if r.kind == "plain"]
        assert not any(a.overlaps(b) for a in srv6 for b in plain), cfg.name


def test_routers_stay_in_their_plane(fabric):
    plan = fabric.plan
    for name in plan.routers:
        p = plan.nodes[name].plane
        for route in fabric.configs[name].routes:
            for hop in route.nexthops:
                assert plan.nodes[fabric.owner[hop.gateway]].plane in (p, None)
                assert hop.gateway in IPv6Network(f"fd20:{p:x}::/32")


def test_plain_routes_converge_around_failed_links():
    """What BGP leaves once it has converged; the uSID routes never change."""
    from testbed.fabric.routes import node_config
    from testbed.scenario import parse as parse_scenario

    plan = make_plan(parse_scenario("name: q", "x"))

    def plain(node, failed):
        cfg = node_config(plan, node, frozenset(failed))
        return {str(r.dst): sorted(h.ifname for h in r.nexthops)
                for r in cfg.routes if r.kind == "plain"}

    def srv6(node, failed):
        return [r for r in node_config(plan, node, frozenset(failed)).routes if r.kind == "srv6"]

    spine_link = {"p0l0-p0s0"}
    assert plain("p0l0", spine_link)["fd10:0:1::/64"] == ["p0l0-eth3"]  # only via p0s1
    assert plain("p0l1", spine_link)["fd10::/64"] == ["p0l1-eth3"]  # p0s0 lost its way
    assert "fd10::/64" not in plain("p0s0", spine_link)
    assert plain("p0s0", spine_link)["fd10:0:1::/64"] == ["p0s0-eth1"]
    assert plain("p1l0", spine_link) == plain("p1l0", set())  # another plane: untouched
    host_link = {"h0-p0l0"}
    assert "fd10::100/128" not in plain("p0l0", host_link)
    assert "fd10::/32" not in plain("h0", host_link) and "fd10:1::/32" in plain("h0", host_link)
    both = spine_link | {"p0l0-p0s1"}
    assert "fd10:0:1::/64" not in plain("p0l0", both)  # no spine left: withdrawn
    for node in ("p0l0", "p0s0", "h0"):
        assert srv6(node, both) == srv6(node, set())
