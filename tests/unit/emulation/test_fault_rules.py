"""The nftables rulesets the injector prepares ahead of the workload (pure): one per node an
action changes, as the node stands after it, with overlapping faults held independently."""
from __future__ import annotations

from testbed.emulation.injector import prepared
from testbed.fabric.plan import make_plan
from testbed.fabric.timeline import schedule
from testbed.scenario import parse


def rulesets(faults: str):
    sc = parse(f"name: f\nfaults: {faults}\n", "f.yaml")
    plan = make_plan(sc)
    actions = [a for a in schedule(plan, sc.faults) if a.condition != "routed"]
    return actions, prepared({link.name: link for link in plan.links}, actions)


def test_a_plane_down_changes_every_node_of_the_plane_in_one_step():
    actions, scripts = rulesets("[{at: 0, kind: plane_down, target: {plane: 1}, duration: 1}]")
    assert sorted(scripts[0]) == ["h0", "h1", "h2", "h3", "p1l0", "p1l1", "p1s0", "p1s1"]
    assert scripts[0]["p1s0"].count("drop") == 2  # both of its ports
    assert scripts[0]["p1s0"].startswith("flush chain inet mrc_faults egress\n")
    assert all("drop" not in s for s in scripts[1].values()), "undone whole"


def test_a_flap_inside_a_plane_down_leaves_the_port_dropping():
    actions, scripts = rulesets(
        "[{at: 0, kind: plane_down, target: {plane: 0}, duration: 2},"
        " {at: 0.5, kind: flap, target: {host: h0, plane: 0}, period: 0.5, count: 1}]")
    steps = [(a.time, a.on, a.event) for a in actions]
    assert steps == [(0, True, 0), (0.5, True, 1), (0.75, False, 1), (2, False, 0)]
    assert 'oifname "h0-eth0" counter drop' in scripts[2]["h0"], (
        "the flap's up must not lift the plane's down")
    assert "drop" not in scripts[3]["h0"]


def test_a_blackhole_over_a_loss_drops_everything_until_it_ends():
    _, scripts = rulesets(
        "[{at: 0, kind: loss, target: {host: h0, plane: 0}, probability: 0.2, direction: up,"
        "  duration: 2},"
        " {at: 1, kind: blackhole, target: {host: h0, plane: 0}, duration: 0.5}]")
    assert 'numgen random mod 10000 < 2000 counter drop' in scripts[0]["h0"]
    assert list(scripts[0]) == ["h0"]  # "up": toward the leaf, the host's end only
    assert scripts[1]["h0"].count("drop") == 1 and "numgen" not in scripts[1]["h0"]
    assert "numgen" in scripts[2]["h0"], "the loss is back when the blackhole ends"
