"""Link latency along paths: what each agent holds a peer's datagrams for, round trips, BDPs.

Numbers by hand: 100 Gbit/s real over 25 Mbit/s emulated is D = 4,000; a 1 us hop is 4 ms
emulated, a 0.5 us NIC 2 ms. Hosts h0, h1 share leaf 0; h2, h3 leaf 1."""
from __future__ import annotations

import pytest

from testbed.fabric.latency import (
    ACROSS_A_SPINE,
    DELAY_IFINDEX_OFFSET,
    PathShape,
    bdp_packets,
    path_shapes,
    port_delay,
    round_trip,
)
from testbed.fabric.paths import evs
from testbed.fabric.plan import make_plan
from testbed.run.traffic import agent_configs, base_rtt
from testbed.scenario import parse

FABRIC = ("fabric: {planes: 2, leaves_per_plane: 2, spines_per_plane: 2, hosts_per_leaf: 2, "
          "host_link: {rate: 25Mbit}, fabric_link: {rate: 50Mbit}, mtu: 4200, %s}\n"
          "qp: {mss: 4096}\n")
REAL = FABRIC % "real_rate: 100Gbit, hop_latency: 1us, nic_latency: 500ns"


def peers_latency(text: str, tmp_path) -> dict[tuple[str, str], float]:
    sc = parse("name: l\n" + text, "t")
    configs = agent_configs(make_plan(sc), sc, "mrc", tmp_path)
    return {(h, p.host): p.latency for h, c in configs.items() for p in c.peers}


def test_peers_latency_counts_the_links_between_them_and_both_nics(tmp_path):
    got = peers_latency(REAL, tmp_path)
    same_leaf = 2 * 0.004 + 2 * 0.002  # host-leaf-host, and both NICs
    across = 4 * 0.004 + 2 * 0.002  # host-leaf-spine-leaf-host, and both NICs
    assert got[("h0", "h1")] == got[("h3", "h2")] == pytest.approx(same_leaf)
    assert got[("h0", "h2")] == got[("h3", "h0")] == got[("h1", "h3")] == pytest.approx(across)
    assert len(got) == 12


def test_without_real_rate_the_latency_is_emulated_as_written(tmp_path):
    got = peers_latency(FABRIC % "hop_latency: 3ms", tmp_path)
    assert got[("h0", "h1")] == pytest.approx(0.006)
    assert got[("h1", "h2")] == pytest.approx(0.012)
    assert set(peers_latency(FABRIC % "hop_latency: 0", tmp_path).values()) == {0.0}


NETEM = FABRIC % "real_rate: 100Gbit, hop_latency: 1us, nic_latency: 500ns, latency_by: netem"


def test_with_netem_the_agents_hold_nothing(tmp_path):
    got = peers_latency(NETEM, tmp_path)
    assert len(got) == 12 and set(got.values()) == {0.0}


def test_with_netem_each_link_delays_by_its_hop_and_host_links_by_a_nic_too():
    plan = make_plan(parse("name: l\n" + NETEM, "t"))
    h0_up = plan.port_to("h0", plan.leaf_of("h0", 0))  # h0 -> leaf: the sender's NIC
    h0_down = plan.port_to(plan.leaf_of("h0", 0), "h0")  # leaf -> h0: the receiver's
    spine = plan.spines[0][1]
    leaf_up = plan.port_to(spine, plan.leaf_of("h0", 0))  # arriving at the spine
    delays = {name: port_delay(plan, p) for name, p in
              (("host up", h0_up), ("host down", h0_down), ("fabric", leaf_up))}
    assert delays["host up"].seconds == delays["host down"].seconds == pytest.approx(0.006)
    assert delays["fabric"].seconds == pytest.approx(0.004)
    # a path's delays add up to what the agents would hold: across a spine 4 hops, 2 NICs
    path = [h0_up, leaf_up, plan.port_to(plan.leaf_of("h2", 0), spine),
            plan.port_to("h2", plan.leaf_of("h2", 0))]
    assert sum(port_delay(plan, p).seconds for p in path) == pytest.approx(4 * 0.004 + 2 * 0.002)
    # what the link can hold in flight in 64-byte frames: 6 ms at 25 Mbit/s = 18,750 B
    assert delays["host up"].limit == 293 + 64
    assert delays["fabric"].limit == 391 + 64  # 4 ms at 50 Mbit/s = 25,000 B
    indexes = {port_delay(plan, p).ifindex for n in plan.nodes for p in plan.ports(n)}
    ports = {p.ifindex for n in plan.nodes for p in plan.ports(n)}
    assert len(indexes) == len(ports) and not indexes & ports
    assert min(indexes) == min(ports) + DELAY_IFINDEX_OFFSET
    assert all(len(port_delay(plan, p).ifname) < 16 for n in plan.nodes for p in plan.ports(n))


def test_without_netem_or_latency_no_link_delays():
    for text in (REAL, FABRIC % "latency_by: netem"):
        plan = make_plan(parse("name: l\n" + text, "t"))
        assert {port_delay(plan, p) for n in plan.nodes for p in plan.ports(n)} == {None}


def test_a_path_shape_comes_from_its_hops():
    plan = make_plan(parse("name: l\n" + REAL, "t"))
    assert PathShape.of(plan, evs(plan, "h0", "h1")[0]) == PathShape(2, 0)
    assert PathShape.of(plan, evs(plan, "h0", "h3")[3]) == PathShape(2, 2) == ACROSS_A_SPINE
    assert path_shapes(plan) == {"same leaf": PathShape(2, 0),
                                 "across a spine": PathShape(2, 2)}
    one_per_leaf = make_plan(parse("name: l\nfabric: {hosts_per_leaf: 1}\n", "t"))
    assert path_shapes(one_per_leaf) == {"across a spine": PathShape(2, 2)}


def test_round_trip_and_bdp_by_hand(tmp_path):
    sc = parse("name: l\n" + REAL, "t")
    packet, ack = (4096 + 40 + 62) * 8, (40 + 62) * 8  # payload, our header, UDP/IPv6/Ethernet
    serialization = 2 * (packet + ack) / 25e6 + 2 * (packet + ack) / 50e6
    rtt = serialization + 2 * (4 * 0.004 + 2 * 0.002)
    assert round_trip(sc, ACROSS_A_SPINE) == pytest.approx(rtt)
    assert base_rtt(sc) == pytest.approx(rtt)
    assert agent_configs(make_plan(sc), sc, "rocev2", tmp_path)["h0"].qp.base_rtt == (
        pytest.approx(rtt))
    # the same in the real frame: 100 Gbit/s over rtt / 4,000 s, in 4,198-byte packets
    assert bdp_packets(sc, ACROSS_A_SPINE) == pytest.approx(100e9 * rtt / 4000 / packet)
    assert bdp_packets(sc, PathShape(2, 0)) == pytest.approx(
        (2 * (packet + ack) / 25e6 + 2 * (2 * 0.004 + 2 * 0.002)) * 25e6 / packet)
