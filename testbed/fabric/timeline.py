"""The fault timeline laid over the fabric plan: which links each fault touches, as on/off
actions in time order (pure).

`schedule` expands a scenario's `faults` into the primitive actions the runner applies at their
times (a link's state, a drop, a loss rate, a rate limit, a delay, on and off). Everything that
can be wrong with a timeline is found here, before anything is built: a target the fabric does
not have, two events of the same kind on the same link at once, a link brought up that is not
down.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from testbed.errors import ScenarioError
from testbed.fabric.plan import FabricPlan, make_plan
from testbed.scenario import Scenario
from testbed.scenario.faults import PARAMS, Fault, Target

# "routed": routing has converged around the link (its ECMP next hops withdrawn); follows
# "down" by the convergence delay. A blackhole or a loss is never seen by routing.
Condition = Literal["down", "blackhole", "loss", "degrade", "delay", "routed"]
_CONDITION: dict[str, Condition] = {"link_down": "down", "flap": "down", "router_down": "down",
              "router_reboot": "down", "plane_down": "down", "blackhole": "blackhole",
              "loss": "loss", "degrade": "degrade", "delay": "delay"}


@dataclass(frozen=True)
class Action:
    """Turn one condition on or off on a set of links at a time (s after the start)."""

    time: float
    on: bool
    condition: Condition
    links: tuple[str, ...]  # link names (plan.Link.name)
    event: int  # index of the scenario fault it comes from
    params: tuple[tuple[str, object], ...] = ()


class TimelineError(ValueError):
    pass


def links_of(plan: FabricPlan, target: Target) -> tuple[str, ...]:
    """Names of the plan's links a target covers; raises if the fabric has no such thing."""
    f = plan.scenario.fabric
    shape = target.shape
    # the shape says which fields are set; -1 stands for "not set" and matches nothing
    plane, leaf, spine = (v if v is not None else -1
                          for v in (target.plane, target.leaf, target.spine))
    if shape == "link":
        if plane >= f.planes or leaf >= f.leaves_per_plane or spine >= f.spines_per_plane:
            raise TimelineError(f"no link {target.label()} in this fabric ({f.planes} planes, "
                                f"{f.leaves_per_plane} leaves, {f.spines_per_plane} spines)")
        return (f"{plan.leaves[plane][leaf]}-{plan.spines[plane][spine]}",)
    if shape == "host_port":
        if target.host not in plan.hosts or plane >= f.planes:
            raise TimelineError(f"no host port {target.label()} in this fabric")
        return (f"{target.host}-{plan.leaf_of(target.host, plane)}",)
    if shape == "router":
        if target.router not in plan.routers:
            raise TimelineError(f"no router {target.router!r} in this fabric")
        return tuple(link.name for link in plan.links
                     if target.router in (link.lower.node, link.upper.node))
    if plane >= f.planes:
        raise TimelineError(f"no plane {plane} in this fabric ({f.planes} planes)")
    return tuple(link.name for link in plan.links if link.plane == plane)


def schedule(plan: FabricPlan, faults: list[Fault], convergence_delay: float = 1.0) -> list[Action]:
    """Every fault as on/off actions in time order; rejects what cannot happen as written.
    Each change of a link's "down" condition is followed, `convergence_delay` later, by the
    same change of its "routed" condition."""
    actions: list[Action] = []
    for i, fault in enumerate(faults):
        try:
            links = links_of(plan, fault.target)
        except TimelineError as exc:
            raise TimelineError(f"faults.{i}: {exc}") from None
        if fault.kind == "link_up":
            actions.append(Action(fault.at, False, "down", links, i))
            continue
        condition: Condition = _CONDITION[fault.kind]
        params = tuple((k, getattr(fault, k)) for k in ("probability", "direction", "rate",
                                                        "fraction", "delay")
                       if k in PARAMS[fault.kind] and getattr(fault, k) is not None)
        if fault.kind == "flap":
            period = fault.period
            assert period is not None  # the schema requires it of a flap
            cycles = fault.count if fault.count is not None else \
                max(1, math.ceil(((fault.until or fault.at) - fault.at) / period))
            for c in range(cycles):
                start = fault.at + c * period
                actions.append(Action(start, True, condition, links, i))
                actions.append(Action(start + period / 2, False, condition, links, i))
            continue
        actions.append(Action(fault.at, True, condition, links, i, params))
        if fault.duration is not None:
            actions.append(Action(fault.at + fault.duration, False, condition, links, i, params))
    actions += [Action(a.time + convergence_delay, a.on, "routed", a.links, a.event)
                for a in actions if a.condition == "down"]
    actions.sort(key=lambda a: (a.time, a.on, a.event))  # at one instant: undo before do
    _check_consistent(actions)
    return actions


def _check_consistent(actions: list[Action]) -> None:
    """Same condition twice on a link at once is ambiguous; undoing what is not on is a typo."""
    active: dict[tuple[str, str], int] = {}
    for a in actions:
        for link in a.links:
            key = (link, a.condition)
            if a.on:
                if key in active:
                    raise TimelineError(
                        f"faults.{a.event}: {a.condition} on {link} at {a.time:g} s overlaps "
                        f"faults.{active[key]}, which is still in effect")
                active[key] = a.event
            elif key in active:
                del active[key]
            elif a.condition == "down":
                raise TimelineError(f"faults.{a.event}: link_up on {link} at {a.time:g} s, "
                                    f"but that link is not down then")


def check(scenario: Scenario, source: str) -> None:
    """What the schema alone cannot check: that the faults name parts of this fabric and never
    contradict each other. Raises `ScenarioError` in the schema's format."""
    if not scenario.faults:
        return
    try:
        schedule(make_plan(scenario), scenario.faults, scenario.routing.convergence_delay)
    except TimelineError as exc:
        raise ScenarioError(f"{source}: invalid scenario (1 problem):\n  {exc}") from None
