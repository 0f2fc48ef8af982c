"""The fault timeline laid over the fabric plan: which links each fault touches, as on/off
actions in time order (pure).

`schedule` expands a scenario's `faults` into the primitive actions the runner applies at their
times (a link's state, a drop, a loss rate, a rate limit, a delay, on and off). Everything that
can be wrong with a timeline is found here, before anything is built, and all of it at once: a
target the fabric does not have, two faults of the same kind on the same link at once, a link
brought up that no `link_down` holds down.

Overlapping faults of different kinds on one link are real (a port flapping while its plane
fails) and allowed. Each fault holds its condition on a link independently of the others (an
action names the fault that holds it, `holder`), and the link's state is the union of what is
held: it is down while any down-condition (link_down, flap, router_down, router_reboot,
plane_down) holds, it drops everything while it is down or blackholed, and routing has
converged around it while any of its down-conditions has been in effect for the convergence
delay. Faults of one kind cannot overlap on a link (two losses, two degrades: which rate
would hold is a guess), so each kind's parameters are never combined.

A straggler touches no link: it is checked here (it names a rank's host, and two never overlap
on one host) and its rank's agent applies it (`straggler_windows`), timed from the same start.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from testbed.errors import ScenarioError
from testbed.fabric.plan import FabricPlan, layout
from testbed.scenario import Scenario
from testbed.scenario.faults import HOST_KINDS, PARAMS, Fault, Target
from testbed.scenario.job_views import views

# "routed": routing has converged around the link (its ECMP next hops withdrawn); follows
# "down" by the convergence delay. A blackhole or a loss is never seen by routing.
Condition = Literal["down", "blackhole", "loss", "degrade", "delay", "routed"]
_CONDITION: dict[str, Condition] = {"link_down": "down", "flap": "down", "router_down": "down",
              "router_reboot": "down", "plane_down": "down", "blackhole": "blackhole",
              "loss": "loss", "degrade": "degrade", "delay": "delay"}


def condition(kind: str) -> Condition | None:
    """The link condition a fault of `kind` turns on (None: it touches no link, a straggler)."""
    return _CONDITION.get(kind)


@dataclass(frozen=True)
class Action:
    """Turn one condition on or off on a set of links at a time (s after the start)."""

    time: float
    on: bool
    condition: Condition
    links: tuple[str, ...]  # link names (plan.Link.name)
    event: int  # index of the scenario fault it comes from
    params: tuple[tuple[str, object], ...] = ()
    holder: int = -1  # the fault that holds the condition: `event`, or for a link_up the
    #                   link_down it ends (-1: same as event)

    @property
    def held_by(self) -> int:
        return self.event if self.holder < 0 else self.holder


class TimelineError(ValueError):
    """Every problem of a timeline, one per line (`problems`)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def links_of(plan: FabricPlan, target: Target) -> tuple[str, ...]:
    """Names of the plan's links a target covers; raises if the fabric has no such thing."""
    f = plan.scenario.fabric
    shape = target.shape
    # the shape says which fields are set; -1 stands for "not set" and matches nothing
    plane, leaf, spine = (v if v is not None else -1
                          for v in (target.plane, target.leaf, target.spine))
    if shape == "link":
        if plane >= f.planes or leaf >= f.leaves_per_plane or spine >= f.spines_per_plane:
            raise TimelineError([f"no link {target.label()} in this fabric ({f.planes} planes, "
                                 f"{f.leaves_per_plane} leaves, {f.spines_per_plane} spines)"])
        return (f"{plan.leaves[plane][leaf]}-{plan.spines[plane][spine]}",)
    if shape == "host_port":
        if target.host not in plan.hosts or plane >= f.planes:
            raise TimelineError([f"no host port {target.label()} in this fabric"])
        return (f"{target.host}-{plan.leaf_of(target.host, plane)}",)
    if shape == "router":
        if target.router not in plan.routers:
            raise TimelineError([f"no router {target.router!r} in this fabric"])
        return tuple(link.name for link in plan.links
                     if target.router in (link.lower.node, link.upper.node))
    if plane >= f.planes:
        raise TimelineError([f"no plane {plane} in this fabric ({f.planes} planes)"])
    return tuple(link.name for link in plan.links if link.plane == plane)


def schedule(plan: FabricPlan, faults: list[Fault], convergence_delay: float = 1.0) -> list[Action]:
    """Every fault as on/off actions in time order; raises `TimelineError` listing every
    problem of the timeline. Each change of a link's "down" condition is followed,
    `convergence_delay` later, by the same change of its "routed" condition."""
    actions: list[Action] = []
    problems: list[str] = []
    stragglers: dict[str, list[tuple[float, float, int]]] = {}
    for i, fault in enumerate(faults):
        if fault.kind in HOST_KINDS:
            problems += _check_straggler(plan, fault, i, stragglers)
            continue
        try:
            links = links_of(plan, fault.target)
        except TimelineError as exc:
            problems += [f"faults.{i}: {p}" for p in exc.problems]
            continue
        if fault.kind == "link_up":
            actions.append(Action(fault.at, False, "down", links, i))  # holder: found below
            continue
        condition: Condition = _CONDITION[fault.kind]
        params = tuple((k, getattr(fault, k)) for k in ("probability", "direction", "rate",
                                                        "fraction", "delay")
                       if k in PARAMS[fault.kind] and getattr(fault, k) is not None)
        if fault.kind == "flap":
            period = fault.period
            assert period is not None  # the schema requires it of a flap
            for c in range(fault.flap_cycles()):
                start = fault.at + c * period
                actions.append(Action(start, True, condition, links, i))
                actions.append(Action(start + period / 2, False, condition, links, i))
            continue
        actions.append(Action(fault.at, True, condition, links, i, params))
        if fault.duration is not None:
            actions.append(Action(fault.at + fault.duration, False, condition, links, i, params))
    actions.sort(key=lambda a: (a.time, a.on, a.event))  # at one instant: undo before do
    actions = _resolve(actions, faults, problems)
    if problems:  # in the file's order
        raise TimelineError(sorted(problems, key=lambda p: int(p.split(":")[0].split(".")[1])))
    actions += [Action(a.time + convergence_delay, a.on, "routed", a.links, a.event,
                       holder=a.held_by) for a in actions if a.condition == "down"]
    actions.sort(key=lambda a: (a.time, a.on, a.event))
    return actions


def straggler_windows(faults: list[Fault], host: str) -> list[tuple[float, float | None, float]]:
    """The (start, end or None for the run's end, factor) of every straggler on `host`: what
    its agent stretches compute by, in seconds after the workload starts."""
    return [(f.at, None if f.duration is None else f.at + f.duration, cast(float, f.factor))
            for f in faults if f.kind == "straggler" and f.target.host == host]


def _check_straggler(plan: FabricPlan, fault: Fault, i: int,
                     seen: dict[str, list[tuple[float, float, int]]]) -> list[str]:
    """A straggler names a rank's host, and two on one host never overlap (which factor would
    hold is a guess, as for two faults of one kind on a link)."""
    host = cast(str, fault.target.host)
    scenario = next((v.scenario for v in views(plan.scenario) if host in v.hosts),
                    plan.scenario)  # with jobs, the job whose rank it is
    if host not in scenario.rank_hosts():
        return [f"faults.{i}: straggler on {host!r}, which runs no rank of the workload"]
    if not scenario.workload.steps:
        return [f"faults.{i}: a straggler slows a training step's compute; the workload is a "
                f"looped collective (give workload.training or workload.chakra)"]
    end = fault.at + fault.duration if fault.duration is not None else float("inf")
    for start, stop, other in seen.get(host, []):
        if fault.at < stop and start < end:
            return [f"faults.{i}: straggler on {host} overlaps faults.{other} (also a "
                    f"straggler on it)"]
    seen.setdefault(host, []).append((fault.at, end, i))
    return []


def _resolve(actions: list[Action], faults: list[Fault], problems: list[str]) -> list[Action]:
    """Names the link_down each link_up ends, and adds to `problems` what is ambiguous or a
    typo: two faults of one kind on a link at once, a link_up where no link_down holds the
    link down. Faults of different kinds may overlap (see the module's docstring)."""
    active: dict[tuple[str, str], int] = {}  # (link, fault kind) -> the fault holding it
    out = []
    for a in actions:
        kind = faults[a.event].kind
        if kind == "link_up":
            link = a.links[0]
            holder = active.pop((link, "link_down"), None)
            if holder is None:
                problems.append(f"faults.{a.event}: link_up on {link} at {a.time:g} s, but no "
                                f"link_down (without a duration) holds that link down then")
                continue
            out.append(Action(a.time, False, "down", a.links, a.event, holder=holder))
            continue
        for link in a.links:
            key = (link, kind)
            if a.on:
                if key in active and active[key] != a.event:
                    problems.append(
                        f"faults.{a.event}: {kind} on {link} at {a.time:g} s overlaps "
                        f"faults.{active[key]} (also a {kind}), which is still in effect; "
                        f"faults of different kinds may overlap, of one kind they may not")
                    continue
                active[key] = a.event
            elif active.get(key) == a.event:
                del active[key]
        out.append(a)
    return out


def check(scenario: Scenario, source: str) -> None:
    """What the schema alone cannot check: that the faults name parts of this fabric and never
    contradict each other. Raises `ScenarioError` in the schema's format. Needs no chosen rate:
    a timeline reads the fabric's names only, the same at every rate (`layout`), so `validate`
    and drills check a `rate: auto` scenario's timeline in full before a run chooses the rate."""
    if scenario.faults:
        check_plan(layout(scenario), source)


def check_plan(plan: FabricPlan, source: str) -> None:
    """`check` on the plan a run has made at the rate it will run, so the run plans once."""
    scenario = plan.scenario
    if not scenario.faults:
        return
    try:
        schedule(plan, scenario.faults, scenario.routing.convergence_delay)
    except TimelineError as exc:
        n = len(exc.problems)
        raise ScenarioError(f"{source}: invalid scenario ({n} problem{'s' if n > 1 else ''}):\n"
                            + "\n".join(f"  {p}" for p in exc.problems)) from None
