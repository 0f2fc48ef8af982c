"""The EV table: every path between two hosts, its steering address, and the covering sample."""
from __future__ import annotations

from ipaddress import IPv6Address

import pytest

from testbed import scenario
from testbed.fabric.paths import (
    all_evs,
    covering_sample,
    entropy_values,
    ev,
    ev_count,
    evs,
    fabric_directed_links,
    pairs,
)
from testbed.fabric.plan import make_plan, usid_address


def make(fabric: str = "{}"):
    return make_plan(scenario.parse(f"name: t\nfabric: {fabric}\n", "x"))


# shape name -> (fabric mapping, EV count worked out by hand)
#   same-leaf ordered pairs S, all ordered pairs H(H-1): planes x (S + (H(H-1) - S) x spines)
SHAPES = {
    "quickstart": ("{}", 2 * (4 + 8 * 2)),                                         # 40
    "partial-last-leaf": ("{hosts: 5, hosts_per_leaf: 2, leaves_per_plane: 3}",
                          2 * (4 + 16 * 2)),                                       # 72
    "one-host-per-leaf": ("{hosts_per_leaf: 1, leaves_per_plane: 3}", 2 * (0 + 6 * 2)),  # 24
    "3p3l2s2h": ("{planes: 3, leaves_per_plane: 3, spines_per_plane: 2, hosts_per_leaf: 2}",
                 3 * (6 + 24 * 2)),                                                # 162
    "ref-64": ("{planes: 4, leaves_per_plane: 8, spines_per_plane: 4, hosts_per_leaf: 8}",
               4 * (448 + 3584 * 4)),                                              # 59136
}


@pytest.fixture(scope="module")
def plan():
    return make()


# ---- the EVs of one pair ---------------------------------------------------------------------

def test_cross_leaf_evs(plan):
    got = evs(plan, "h0", "h3")
    assert [(e.plane, e.spine) for e in got] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [e.address for e in got] == [IPv6Address("fcbb:bb00:e000:d001:103::"),
                                        IPv6Address("fcbb:bb00:e001:d001:103::"),
                                        IPv6Address("fcbb:bb01:e100:d101:103::"),
                                        IPv6Address("fcbb:bb01:e101:d101:103::")]
    assert [e.hops for e in got] == [("h0", "p0l0", "p0s0", "p0l1", "h3"),
                                     ("h0", "p0l0", "p0s1", "p0l1", "h3"),
                                     ("h0", "p1l0", "p1s0", "p1l1", "h3"),
                                     ("h0", "p1l0", "p1s1", "p1l1", "h3")]
    assert [e.label for e in got] == ["p0s0", "p0s1", "p1s0", "p1s1"]
    assert all((e.src, e.dst) == ("h0", "h3") for e in got)
    assert got[0].directed_links() == [("h0", "p0l0"), ("p0l0", "p0s0"), ("p0s0", "p0l1"),
                                       ("p0l1", "h3")]


def test_reverse_direction(plan):
    assert [str(e.address) for e in evs(plan, "h3", "h0")] == [
        "fcbb:bb00:e000:d000:100::", "fcbb:bb00:e001:d000:100::",
        "fcbb:bb01:e100:d100:100::", "fcbb:bb01:e101:d100:100::"]


def test_same_leaf_evs(plan):
    got = evs(plan, "h0", "h1")
    assert [e.address for e in got] == [IPv6Address("fcbb:bb00:d000:101::"),
                                        IPv6Address("fcbb:bb01:d100:101::")]
    assert [e.hops for e in got] == [("h0", "p0l0", "h1"), ("h0", "p1l0", "h1")]
    assert [e.spine for e in got] == [None, None]
    assert [e.label for e in got] == ["p0-local", "p1-local"]


def test_several_evs_a_path_take_the_paths_in_turn(plan):
    """Three EVs a path: EVs 0-3 cross the 4 paths of h0 -> h3 once, 4-7 again, and so on;
    toward h1 (one path a plane) EVs 0, 2, 4 share plane 0's path."""
    got = entropy_values(plan, "h0", "h3", 3)
    assert [e.label for e in got] == ["p0s0", "p0s1", "p1s0", "p1s1"] * 3
    local = entropy_values(plan, "h0", "h1", 3)
    assert [e.label for e in local] == ["p0-local", "p1-local"] * 3
    assert entropy_values(plan, "h0", "h3") == evs(plan, "h0", "h3")


def test_same_leaf_ev_needs_same_leaf(plan):
    with pytest.raises(ValueError):
        ev(plan, "h0", "h3", 0, None)


def test_sid_routers(plan):
    assert ev(plan, "h0", "h3", 0, 1).sid_routers() == ("p0s1", "p0l1")
    assert ev(plan, "h2", "h1", 1, 0).sid_routers() == ("p1s0", "p1l0")
    assert ev(plan, "h0", "h1", 0, None).sid_routers() == ("p0l0",)
    assert ev(plan, "h3", "h2", 1, None).sid_routers() == ("p1l1",)


def test_address_lists_the_sid_routers_then_the_destination():
    p = make(SHAPES["3p3l2s2h"][0])
    for e in all_evs(p):
        usids = [p.nodes[r].usid for r in e.sid_routers()] + [p.nodes[e.dst].usid]
        assert e.address == usid_address(e.plane, usids)


def test_pairs(plan):
    got = list(pairs(plan))
    assert len(got) == 12
    assert ("h0", "h0") not in got and ("h3", "h0") in got


# ---- counting --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
def test_ev_count(shape):
    fabric, expected = SHAPES[shape]
    p = make(fabric)
    assert ev_count(p) == expected
    assert len(list(all_evs(p))) == expected


def test_all_evs_are_distinct():
    p = make(SHAPES["partial-last-leaf"][0])
    every = list(all_evs(p))
    assert len({(e.src, e.dst, e.plane, e.spine) for e in every}) == len(every)
    # the address names the path, not the source: distinct per source
    assert len({(e.src, e.address) for e in every}) == len(every)


# ---- the covering sample ---------------------------------------------------------------------

MULTI_LEAF = list(SHAPES)


def sample_of(shape: str, seed: int = 1):
    p = make(SHAPES[shape][0])
    return p, covering_sample(p, seed)


@pytest.mark.parametrize("shape", MULTI_LEAF)
def test_covering_sample_covers_every_directed_link(shape):
    p, sample = sample_of(shape)
    covered = {link for e in sample for link in e.directed_links()}
    missing = fabric_directed_links(p) - covered
    assert not missing, f"links no sampled EV crosses: {sorted(missing)[:5]}"


@pytest.mark.parametrize("shape", MULTI_LEAF)
def test_covering_sample_executes_every_router_sid(shape):
    p, sample = sample_of(shape)
    executed = {(r, e.plane) for e in sample for r in e.sid_routers()}
    assert executed == {(r, p.nodes[r].plane) for r in p.routers}


@pytest.mark.parametrize("shape", MULTI_LEAF)
def test_sampled_evs_are_real_evs(shape):
    p, sample = sample_of(shape)
    for e in sample:
        assert e in evs(p, e.src, e.dst)
    assert len({(e.src, e.dst, e.plane, e.spine) for e in sample}) == len(sample)


def test_covering_sample_is_small_for_ref64():
    _, sample = sample_of("ref-64")
    # one EV per host, plane and spine (64 x 4 x 4), one local EV per leaf and plane (32),
    # plus a few for links still uncovered
    assert 64 * 4 * 4 + 32 <= len(sample) <= 1100
    assert len(sample) * 50 < SHAPES["ref-64"][1]


def test_covering_sample_is_reproducible():
    p = make(SHAPES["3p3l2s2h"][0])
    assert covering_sample(p, 7) == covering_sample(p, 7)


def test_fabric_directed_links(plan):
    links = fabric_directed_links(plan)
    assert len(links) == 32
    assert ("h0", "p0l0") in links and ("p0l0", "h0") in links
    assert ("p1s1", "p1l0") in links
    assert ("p0l0", "p1s0") not in links  # planes never meet
