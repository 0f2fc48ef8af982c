"""The fault timeline of a scenario: what breaks, where, when, and for how long (pure).

A scenario's `faults` list names each event in fabric terms; `schedule` expands it into the
primitive actions the runner applies at their times (a link's state, a drop, a loss rate, a
rate limit, a delay, on and off). Everything that can be wrong with a timeline is found here,
before anything is built: a target the fabric does not have, a parameter the kind does not
take, two events of the same kind on the same link at once, a link brought up that is not down.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .units import Rate

LINK_KINDS = ("link_down", "link_up", "flap", "blackhole", "loss", "degrade", "delay")
ROUTER_KINDS = ("router_down", "router_reboot")
Kind = Literal["link_down", "link_up", "flap", "blackhole", "loss", "degrade", "delay",
               "router_down", "router_reboot", "plane_down"]
_PARAMS = {  # parameters each kind takes (beyond at, kind, target, duration)
    "link_down": set(), "link_up": set(), "blackhole": set(), "router_down": set(),
    "router_reboot": set(), "plane_down": set(),
    "flap": {"period", "count", "until"}, "loss": {"probability", "direction"},
    "degrade": {"rate", "fraction"}, "delay": {"delay"},
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Target(_Strict):
    """One of: a fabric link {plane, leaf, spine}; a host port {host, plane}; a router
    {router}; a whole plane {plane}."""

    plane: int | None = Field(None, ge=0)
    leaf: int | None = Field(None, ge=0)
    spine: int | None = Field(None, ge=0)
    host: str | None = None
    router: str | None = None

    @property
    def shape(self) -> str:
        keys = frozenset(k for k in ("plane", "leaf", "spine", "host", "router")
                         if getattr(self, k) is not None)
        return {frozenset({"plane", "leaf", "spine"}): "link",
                frozenset({"host", "plane"}): "host_port",
                frozenset({"router"}): "router",
                frozenset({"plane"}): "plane"}.get(keys, "invalid")

    @model_validator(mode="after")
    def _one_shape(self) -> Target:
        if self.shape == "invalid":
            raise ValueError("a target is {plane, leaf, spine} (a leaf-spine link), "
                             "{host, plane} (a host port), {router} or {plane}")
        return self

    def label(self) -> str:
        return {"link": f"p{self.plane} leaf {self.leaf}-spine {self.spine}",
                "host_port": f"{self.host} port of plane {self.plane}",
                "router": f"{self.router}", "plane": f"plane {self.plane}"}[self.shape]


class Fault(_Strict):
    """One event. `at` and `duration` are seconds after the workload starts."""

    at: float = Field(ge=0, le=86_400)
    kind: Kind
    target: Target
    duration: float | None = Field(None, gt=0, le=86_400,
                                   description="undone after this long; absent: stays")
    period: float | None = Field(None, gt=0, le=3600, description="flap: one down+up cycle, s")
    count: int | None = Field(None, ge=1, le=100_000, description="flap: cycles")
    until: float | None = Field(None, gt=0, le=86_400, description="flap: last cycle starts "
                                                                   "before this time, s")
    probability: float | None = Field(None, gt=0, le=1, description="loss: per packet")
    direction: Literal["both", "up", "down"] = Field(
        "both", description="loss: 'up' toward the spine, 'down' toward the host, or both")
    rate: Rate | None = Field(None, description="degrade: the new line rate")
    fraction: float | None = Field(None, gt=0, lt=1, description="degrade: of the line rate")
    delay: float | None = Field(None, gt=0, le=10, description="delay: one-way, s (netem)")

    @model_validator(mode="after")
    def _fits_kind(self) -> Fault:
        given = {k for k in ("period", "count", "until", "probability", "rate", "fraction",
                             "delay") if getattr(self, k) is not None}
        if self.direction != "both":
            given.add("direction")
        extra = given - _PARAMS[self.kind]
        if extra:
            raise ValueError(f"{self.kind} does not take {', '.join(sorted(extra))}")
        shape = self.target.shape
        wanted = ("link", "host_port") if self.kind in LINK_KINDS else \
            ("router",) if self.kind in ROUTER_KINDS else ("plane",)
        if shape not in wanted:
            raise ValueError(f"{self.kind} applies to a {' or '.join(wanted)} target, "
                             f"not a {shape}")
        needs = {"flap": "period", "loss": "probability", "delay": "delay"}
        if self.kind in needs and needs[self.kind] not in given:
            raise ValueError(f"{self.kind} needs {needs[self.kind]}")
        if self.kind == "flap" and (self.count is None) == (self.until is None):
            raise ValueError("flap needs exactly one of count and until")
        if self.kind == "flap" and self.duration is not None:
            raise ValueError("flap takes period and count/until, not duration")
        if self.kind == "degrade" and (self.rate is None) == (self.fraction is None):
            raise ValueError("degrade needs exactly one of rate and fraction")
        if self.kind == "router_reboot" and self.duration is None:
            raise ValueError("router_reboot needs duration (how long the router is down)")
        if self.kind == "link_up" and self.duration is not None:
            raise ValueError("link_up takes no duration")
        return self


class Routing(_Strict):
    """How the RoCEv2 baseline's routing reacts; MRC's uSID paths are static (BGP off)."""

    convergence_delay: float = Field(
        1.0, ge=0, le=60,
        description="seconds from a link or router going down (or up) until the upstream "
                    "routers' ECMP groups change; default 1 s: BFD detection at a common "
                    "3 x 300 ms plus BGP updates (the MRC notes: 'seconds for BGP/ECMP "
                    "fabrics')")


# ---- the timeline -------------------------------------------------------------------------

# "routed": routing has converged around the link (its ECMP next hops withdrawn); follows
# "down" by the convergence delay. A blackhole or a loss is never seen by routing.
Condition = Literal["down", "blackhole", "loss", "degrade", "delay", "routed"]
_CONDITION = {"link_down": "down", "flap": "down", "router_down": "down",
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


def links_of(plan, target: Target) -> tuple[str, ...]:
    """Names of the plan's links a target covers; raises if the fabric has no such thing."""
    f = plan.scenario.fabric
    shape = target.shape
    if shape == "link":
        if target.plane >= f.planes or target.leaf >= f.leaves_per_plane \
                or target.spine >= f.spines_per_plane:
            raise TimelineError(f"no link {target.label()} in this fabric ({f.planes} planes, "
                                f"{f.leaves_per_plane} leaves, {f.spines_per_plane} spines)")
        names = (f"{plan.leaves[target.plane][target.leaf]}-"
                 f"{plan.spines[target.plane][target.spine]}",)
    elif shape == "host_port":
        if target.host not in plan.hosts or target.plane >= f.planes:
            raise TimelineError(f"no host port {target.label()} in this fabric")
        names = (f"{target.host}-{plan.leaf_of(target.host, target.plane)}",)
    elif shape == "router":
        if target.router not in plan.routers:
            raise TimelineError(f"no router {target.router!r} in this fabric")
        names = tuple(link.name for link in plan.links
                      if target.router in (link.lower.node, link.upper.node))
    else:
        if target.plane >= f.planes:
            raise TimelineError(f"no plane {target.plane} in this fabric ({f.planes} planes)")
        names = tuple(link.name for link in plan.links if link.plane == target.plane)
    return names


def schedule(plan, faults: list[Fault], convergence_delay: float = 1.0) -> list[Action]:
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
        condition = _CONDITION[fault.kind]
        params = tuple((k, getattr(fault, k)) for k in ("probability", "direction", "rate",
                                                        "fraction", "delay")
                       if k in _PARAMS[fault.kind] and getattr(fault, k) is not None)
        if fault.kind == "flap":
            cycles = fault.count if fault.count is not None else \
                max(1, math.ceil((fault.until - fault.at) / fault.period))
            for c in range(cycles):
                start = fault.at + c * fault.period
                actions.append(Action(start, True, condition, links, i))
                actions.append(Action(start + fault.period / 2, False, condition, links, i))
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
