"""The faults a scenario may name: what breaks, where, when, and for how long (pure schema).

Each fault is checked on its own here (a parameter the kind does not take, a missing one);
what needs the fabric (a target it does not have, two events of a kind on one link at once)
is checked when the timeline is laid over the plan (testbed/fabric/timeline.py).
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from testbed.scenario import limits
from testbed.scenario.units import RateIn, TimeIn

LINK_KINDS = ("link_down", "link_up", "flap", "blackhole", "loss", "degrade", "delay")
ROUTER_KINDS = ("router_down", "router_reboot")
HOST_KINDS = ("straggler",)  # a rank's compute, not the network: the agent applies it
Kind = Literal["link_down", "link_up", "flap", "blackhole", "loss", "degrade", "delay",
               "router_down", "router_reboot", "plane_down", "straggler"]
PARAMS = {  # parameters each kind takes (beyond at, kind, target, duration)
    "link_down": set(), "link_up": set(), "blackhole": set(), "router_down": set(),
    "router_reboot": set(), "plane_down": set(),
    "flap": {"period", "count", "until"}, "loss": {"probability", "direction"},
    "degrade": {"rate", "fraction"}, "delay": {"delay"}, "straggler": {"factor"},
}
MAX_SLOWDOWN = 100.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Target(_Strict):
    """One of: a fabric link {plane, leaf, spine}; a host port {host, plane}; a router
    {router}; a whole plane {plane}; a host {host} (the rank it runs)."""

    plane: int | None = Field(None, ge=0, le=limits.MAX_PLANES - 1)
    leaf: int | None = Field(None, ge=0, le=limits.MAX_LEAVES_PER_PLANE - 1)
    spine: int | None = Field(None, ge=0, le=limits.MAX_SPINES_PER_PLANE - 1)
    host: str | None = Field(None, max_length=40)
    router: str | None = Field(None, max_length=40)

    @property
    def shape(self) -> str:
        keys = frozenset(k for k in ("plane", "leaf", "spine", "host", "router")
                         if getattr(self, k) is not None)
        return {frozenset({"plane", "leaf", "spine"}): "link",
                frozenset({"host", "plane"}): "host_port",
                frozenset({"router"}): "router", frozenset({"host"}): "host",
                frozenset({"plane"}): "plane"}.get(keys, "invalid")

    @model_validator(mode="after")
    def _one_shape(self) -> Target:
        if self.shape == "invalid":
            raise ValueError("a target is {plane, leaf, spine} (a leaf-spine link), "
                             "{host, plane} (a host port), {router}, {plane} or {host}")
        return self

    def label(self) -> str:
        return {"link": f"p{self.plane} leaf {self.leaf}-spine {self.spine}",
                "host_port": f"{self.host} port of plane {self.plane}",
                "router": f"{self.router}", "plane": f"plane {self.plane}",
                "host": f"{self.host}"}[self.shape]


class Fault(_Strict):
    """One event. `at` and `duration` are after the workload starts; its times are the real
    fabric's with fabric.real_rate (run D times longer), else emulated seconds. A straggler
    slows the compute of the rank on `target.host` by `factor` from `at` for `duration`
    (absent: to the end); that rank's agent applies it, timed from the same start."""

    at: Annotated[float, TimeIn(0, limits.MAX_TIME)]
    kind: Kind
    target: Target
    duration: Annotated[float, TimeIn(0, limits.MAX_TIME, above=True)] | None = Field(
        None, description="undone after this long; absent: stays")
    period: Annotated[float, TimeIn(0, 3600, above=True)] | None = Field(
        None, description="flap: one down+up cycle; at least 1 ms once emulated "
                          "(limits.MIN_FLAP_PERIOD)")
    count: int | None = Field(None, ge=1, le=limits.MAX_FLAP_CYCLES, description="flap: cycles")
    until: Annotated[float, TimeIn(0, limits.MAX_TIME, above=True)] | None = Field(
        None, description="flap: last cycle starts before this time")
    probability: float | None = Field(
        None, ge=limits.MIN_LOSS_PROBABILITY, le=1,
        description="loss: per packet, in steps of 1/10,000 (the drop rule's resolution); "
                    "smaller would never drop")
    direction: Literal["both", "up", "down"] = Field(
        "both", description="loss: 'up' toward the spine, 'down' toward the host, or both")
    rate: Annotated[int, RateIn(limits.MIN_RATE, limits.MAX_RATE)] | None = Field(
        None, description="degrade: the new line rate, below the link's own")
    fraction: float | None = Field(None, gt=0, lt=1, description="degrade: of the line rate")
    delay: Annotated[float, TimeIn(0, 10, above=True)] | None = Field(
        None, description="delay: one-way (netem)")
    factor: float | None = Field(None, gt=1, le=MAX_SLOWDOWN,
                                 description="straggler: the host's compute runs this many "
                                             "times slower while the fault holds")

    @model_validator(mode="after")
    def _fits_kind(self) -> Fault:
        given = {k for k in ("period", "count", "until", "probability", "rate", "fraction",
                             "delay", "factor") if getattr(self, k) is not None}
        if self.direction != "both":
            given.add("direction")
        extra = given - PARAMS[self.kind]
        if extra:
            raise ValueError(f"{self.kind} does not take {', '.join(sorted(extra))}")
        shape = self.target.shape
        wanted = (("link", "host_port") if self.kind in LINK_KINDS else
                  ("router",) if self.kind in ROUTER_KINDS else
                  ("host",) if self.kind in HOST_KINDS else ("plane",))
        if shape not in wanted:
            raise ValueError(f"{self.kind} applies to a {' or '.join(wanted)} target, "
                             f"not a {shape}")
        needs = {"flap": "period", "loss": "probability", "delay": "delay",
                 "straggler": "factor"}
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
        if self.kind == "flap" and self.flap_cycles() > limits.MAX_FLAP_CYCLES:
            raise ValueError(f"a flap of period {self.period:g} s from {self.at:g} s until "
                             f"{self.until:g} s is {self.flap_cycles():,} cycles, more than "
                             f"{limits.MAX_FLAP_CYCLES:,}; lengthen period or shorten until")
        if self.kind == "link_up" and self.duration is not None:
            raise ValueError("link_up takes no duration")
        return self

    def flap_cycles(self) -> int:
        """Down+up cycles of a flap: the one count both the limits and fabric/timeline.py use; 0
        for other kinds."""
        if self.kind != "flap" or self.period is None:
            return 0
        if self.count is not None:
            return self.count
        return max(1, math.ceil(((self.until or self.at) - self.at) / self.period))

    def actions(self) -> int:
        """How many changes the injector makes for this fault (each undo counted)."""
        return 2 * self.flap_cycles() if self.kind == "flap" else 2


class Routing(_Strict):
    """How the RoCEv2 baseline's routing reacts; MRC's uSID paths are static (BGP off)."""

    convergence_delay: Annotated[float, TimeIn(0, 60)] = Field(
        1.0,
        description="emulated seconds (not scaled by the time dilation) from a link or "
                    "router going down (or up) until the upstream routers' ECMP groups "
                    "change; default 1 s: BFD detection at a common "
                    "3 x 300 ms plus BGP updates (the MRC notes: 'seconds for BGP/ECMP "
                    "fabrics')")
