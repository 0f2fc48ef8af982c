"""The fault timeline: validation against the fabric and expansion into timed actions."""
from __future__ import annotations

import pytest

from testbed.errors import ScenarioError
from testbed.fabric.plan import make_plan
from testbed.fabric.timeline import check, schedule
from testbed.scenario import parse


def timeline(faults: str, routed: bool = False):
    """The actions of a timeline; without `routed`, only the faults' own (not routing's echo)."""
    sc = parse(f"name: f\nfaults: {faults}\n", "f.yaml")
    actions = schedule(make_plan(sc), sc.faults, sc.routing.convergence_delay)
    return actions if routed else [a for a in actions if a.condition != "routed"]


def error_of(faults: str) -> str:
    with pytest.raises(ScenarioError) as info:
        check(parse(f"name: f\nfaults: {faults}\n", "f.yaml"), "f.yaml")
    return str(info.value)


def test_targets_become_links():
    acts = timeline("[{at: 1, kind: router_down, target: {router: p0s1}, duration: 2},"
                    " {at: 0, kind: plane_down, target: {plane: 1}, duration: 0.5},"
                    " {at: 3, kind: blackhole, target: {host: h3, plane: 1}}]")
    assert [(a.time, a.on, a.condition, a.event) for a in acts] == [
        (0, True, "down", 1), (0.5, False, "down", 1), (1, True, "down", 0),
        (3, False, "down", 0), (3, True, "blackhole", 2)]
    assert acts[2].links == ("p0l0-p0s1", "p0l1-p0s1")
    assert len(acts[0].links) == 8  # plane 1: 4 host links + 4 fabric links
    assert acts[4].links == ("h3-p1l1",)


def test_flap_expands_into_cycles():
    acts = timeline("[{at: 1, kind: flap, target: {plane: 0, leaf: 0, spine: 0},"
                    " period: 0.4, count: 3}]")
    assert [(round(a.time, 3), a.on) for a in acts] == [
        (1, True), (1.2, False), (1.4, True), (1.6, False), (1.8, True), (2.0, False)]
    until = timeline("[{at: 0, kind: flap, target: {plane: 0, leaf: 0, spine: 0},"
                     " period: 1, until: 2.5}]")
    assert len(until) == 6


def test_link_up_ends_a_link_down():
    acts = timeline("[{at: 1, kind: link_down, target: {plane: 0, leaf: 1, spine: 0}},"
                    " {at: 2, kind: link_up, target: {plane: 0, leaf: 1, spine: 0}}]")
    assert [(a.time, a.on, a.event) for a in acts] == [(1, True, 0), (2, False, 1)]
    # the link_up ends the link_down's hold (fault 0), not a hold of its own: the injector
    # would otherwise keep the link down for good
    assert [a.held_by for a in acts] == [0, 0]
    routed = [a for a in timeline("[{at: 1, kind: link_down, target: {plane: 0, leaf: 1, "
                                  "spine: 0}}, {at: 2, kind: link_up, target: {plane: 0, "
                                  "leaf: 1, spine: 0}}]", routed=True) if a.condition == "routed"]
    assert [(a.time, a.on, a.held_by) for a in routed] == [(2, True, 0), (3, False, 0)]


def test_faults_of_different_kinds_may_overlap_on_a_link():
    """A port flapping while its plane is down: each fault holds "down" on its own."""
    acts = timeline("[{at: 0, kind: plane_down, target: {plane: 0}, duration: 2},"
                    " {at: 1, kind: flap, target: {host: h0, plane: 0}, period: 0.5, count: 4},"
                    " {at: 0.5, kind: router_down, target: {router: p0s0}, duration: 1}]")
    port = [(a.time, a.on, a.held_by) for a in acts if "h0-p0l0" in a.links]
    assert port == [(0, True, 0), (1, True, 1), (1.25, False, 1), (1.5, True, 1),
                    (1.75, False, 1), (2, False, 0), (2, True, 1), (2.25, False, 1),
                    (2.5, True, 1), (2.75, False, 1)]


def test_every_problem_of_a_timeline_is_listed():
    message = error_of(
        "[{at: 1, kind: link_down, target: {plane: 0, leaf: 5, spine: 0}},"
        " {at: 1, kind: link_up, target: {plane: 0, leaf: 0, spine: 0}},"
        " {at: 0, kind: loss, target: {host: h0, plane: 0}, probability: 0.1, duration: 5},"
        " {at: 2, kind: loss, target: {host: h0, plane: 0}, probability: 0.2},"
        " {at: 1, kind: router_down, target: {router: p9s9}}]")
    assert "invalid scenario (4 problems)" in message
    for part in ("faults.0: no link p0 leaf 5-spine 0", "faults.1: link_up on p0l0-p0s0",
                 "faults.3: loss on h0-p0l0 at 2 s overlaps faults.2",
                 "faults.4: no router 'p9s9'"):
        assert part in message, message


@pytest.mark.parametrize("faults, message", [
    ("[{at: 1, kind: loss, target: {host: h9, plane: 0}, probability: 0.1}]",
     "faults.0: no host port h9 port of plane 0 in this fabric"),
    ("[{at: 1, kind: link_down, target: {plane: 0, leaf: 5, spine: 0}}]",
     "faults.0: no link p0 leaf 5-spine 0 in this fabric"),
    ("[{at: 1, kind: link_up, target: {plane: 0, leaf: 0, spine: 0}}]",
     "link_up on p0l0-p0s0 at 1 s, but no link_down (without a duration) holds that link"),
    ("[{at: 1, kind: plane_down, target: {plane: 0}, duration: 3},"
     " {at: 2, kind: link_up, target: {plane: 0, leaf: 0, spine: 0}}]",
     "link_up on p0l0-p0s0 at 2 s, but no link_down"),
    ("[{at: 1, kind: loss, target: {plane: 0, leaf: 0, spine: 0}}]", "loss needs probability"),
    ("[{at: 1, kind: loss, target: {plane: 0, leaf: 0, spine: 0}, probability: 0.1, rate: 1Mbit}]",
     "loss does not take rate"),
    ("[{at: 1, kind: router_down, target: {plane: 0}}]",
     "router_down applies to a router target, not a plane"),
    ("[{at: 1, kind: degrade, target: {plane: 0, leaf: 0, spine: 0}}]",
     "degrade needs exactly one of rate and fraction"),
    ("[{at: 1, kind: flap, target: {plane: 0, leaf: 0, spine: 0}, period: 1}]",
     "flap needs exactly one of count and until"),
    ("[{at: 1, kind: router_reboot, target: {router: p0l0}}]", "router_reboot needs duration"),
    ("[{at: 1, kind: blackhole, target: {plane: 0, leaf: 0}}]",
     "a target is {plane, leaf, spine}"),
    ("[{at: 0, kind: loss, target: {host: h0, plane: 0}, probability: 0.1, duration: 5},"
     " {at: 2, kind: loss, target: {host: h0, plane: 0}, probability: 0.2}]",
     "faults.1: loss on h0-p0l0 at 2 s overlaps faults.0 (also a loss), which is still in effect"),
    ("[{at: 0, kind: flap, target: {plane: 0, leaf: 0, spine: 0}, period: 1, count: 3},"
     " {at: 1.2, kind: flap, target: {plane: 0, leaf: 0, spine: 0}, period: 1, count: 1}]",
     "faults.1: flap on p0l0-p0s0 at 1.2 s overlaps faults.0 (also a flap)"),
])
def test_bad_timelines_are_rejected_before_anything_runs(faults: str, message: str):
    assert message in error_of(faults)


def test_routing_converges_a_delay_after_down_and_up():
    acts = timeline("[{at: 1, kind: link_down, target: {plane: 0, leaf: 1, spine: 0},"
                    " duration: 3}, {at: 0, kind: blackhole, target: {host: h0, plane: 0},"
                    " duration: 2}]", routed=True)
    assert [(a.time, a.on, a.condition) for a in acts] == [
        (0, True, "blackhole"), (1, True, "down"), (2, False, "blackhole"),
        (2, True, "routed"), (4, False, "down"), (5, False, "routed")]
