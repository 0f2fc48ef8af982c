"""Placement over servers: which node runs where, which links cross, what they carry. The
expected values are worked out by hand from the plan's link order (host links plane by plane,
then each leaf's spines), not read back from the code."""
from __future__ import annotations

from testbed import scenario
from testbed.fabric.placement import place
from testbed.fabric.plan import make_plan

QUICK = ("name: q\nfabric: {planes: 2, leaves_per_plane: 2, spines_per_plane: 2, "
         "hosts_per_leaf: 2, host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}, "
         "mtu: 4200}\nqp: {mss: 4096}\n")
REF64 = ("name: ref\nfabric: {planes: 4, leaves_per_plane: 8, spines_per_plane: 4, "
         "hosts_per_leaf: 8}\n")
THREE = ("cluster:\n  servers:\n"
         "    - {name: a, ssh: root@192.0.2.1, underlay: 10.0.0.1}\n"
         "    - {name: b, ssh: root@192.0.2.2, underlay: 10.0.0.2}\n"
         "    - {name: c, ssh: root@192.0.2.3, underlay: 10.0.0.3}\n")


def placed(text: str):
    sc = scenario.parse(text, "x")
    plan = make_plan(sc)
    assert sc.cluster is not None
    return plan, place(plan, sc.cluster)


def test_pod_placement_of_the_quickstart_on_two_servers():
    plan, pl = placed(QUICK + "cluster: {emulated: 2}\n")
    assert pl.servers == ("srv0", "srv1")
    assert pl.nodes_on("srv0") == ("h0", "h1", "p0l0", "p0s0", "p1l0", "p1s0")
    assert pl.nodes_on("srv1") == ("h2", "h3", "p0l1", "p0s1", "p1l1", "p1s1")
    # each spine reaches the one leaf of the other server: 4 spines x 1 link
    assert sorted(link.name for link in pl.crossing) == [
        "p0l0-p0s1", "p0l1-p0s0", "p1l0-p1s1", "p1l1-p1s0"]
    # links 0..7 are host links, then p0l0-s0 (8), p0l0-s1 (9), p0l1-s0 (10), ... p1l1-s1 (15)
    assert pl.vni == {"p0l0-p0s1": 10009, "p0l1-p0s0": 10010,
                      "p1l0-p1s1": 10013, "p1l1-p1s0": 10014}
    assert pl.underlay == {"srv0": "10.254.0.1", "srv1": "10.254.0.2"}
    (pair,) = pl.pairs
    assert pair.servers == ("srv0", "srv1") and len(pair.links) == 4
    assert pair.rate == 4 * 25_000_000
    # a 4200 B packet is a 4214 B frame, 4264 B on an IPv4 underlay: 100 Mbit/s x 4264/4214
    assert pair.underlay_rate == 101_186_521
    text = "\n".join(pl.describe(plan))
    assert "4 of 16 links cross between servers" in text
    assert "srv0<->srv1: 4 links, up to 100.0 Mbit/s each way (101.2 Mbit/s" in text


def test_round_robin_crosses_more_than_pods():
    _, pod = placed(QUICK + "cluster: {emulated: 2}\n")
    _, rr = placed(QUICK + "cluster: {emulated: 2, placement: round_robin}\n")
    # h0 s0, h1 s1, h2 s0, h3 s1, p0l0 s0, p0l1 s1, p0s0 s0, p0s1 s1, plane 1 alike:
    # h1 and h2 cross to their leaves in both planes (4), and each leaf to one spine (4)
    assert len(rr.crossing) == 8 > len(pod.crossing) == 4
    assert {link.kind for link in rr.crossing} == {"host", "fabric"}


def test_pods_never_split_a_host_from_its_leaves_at_scale():
    plan, pl = placed(REF64 + THREE)
    assert all(link.kind == "fabric" for link in pl.crossing)
    # 8 pods over 3 servers: 3, 3, 2; spines 0..15 in turn: a 6, b 5, c 5; a spine's links to
    # the leaves of the two other servers cross: 6 x 5 + 5 x 5 + 5 x 6
    assert len(pl.crossing) == 85
    assert [len(pl.nodes_on(s)) for s in "abc"] == [3 * 12 + 6, 3 * 12 + 5, 2 * 12 + 5]
    # every pair of servers carries some, and the three pairs account for every crossing link
    assert [p.servers for p in pl.pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert sum(len(p.links) for p in pl.pairs) == 85
    assert len(set(pl.vni.values())) == 85


def test_ipv6_underlay_counts_the_larger_header():
    text = QUICK + ("cluster:\n  servers:\n"
                    "    - {name: a, ssh: root@h1, underlay: 'fd00::1'}\n"
                    "    - {name: b, ssh: root@h2, underlay: 'fd00::2'}\n")
    _, pl = placed(text)
    (pair,) = pl.pairs
    assert pair.underlay_rate == 100_000_000 * (4214 + 70) // 4214
