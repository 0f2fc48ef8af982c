"""A run's transport timers in emulated seconds, and where they depart from the real fabric (pure).

The timers: each transport's ACK timeout and retry schedule, and MRC's probe interval, probe
timeout and congestion holdoff. The scenario states them in its frame (testbed/scenario/
schema.py): with fabric.real_rate they are the real fabric's, their defaults the
specifications' (MRC: 1.024 us x 2^8 and the EV probes' 2 ms, the OCP MRC API's examples;
RoCEv2: 4.096 us x 2^20 with 7 retries at a fixed interval, NCCL's), and `Frame.emulated`
runs them D times longer; without it they are emulated seconds, as written.

A real timer times D can outlast any run (NCCL's 4.29 s at D = 4,000 is 4.8 hours, and a QP
gives up after 8 of them). A scenario may then *compress* its timers: with
`qp.compress_above_rtts: N`, every timer stated above N base RTTs (a round trip across a spine,
queues empty, in the real frame) runs at N base RTTs instead, and each one compressed is a
`Departure`. A retry schedule keeps its shape (its counts and doubling) from the compressed
timeout. A scenario whose retry schedule, emulated, outlasts its max_wall_time is refused
(`check`): a QP that lost its path could not give up within the run's bound.

Floors that stay whatever the frame: a QP's timeout is at least srtt + 4 rttvar of what it
measures (qp.py: the emulated hosts' scheduling delay is milliseconds at any D); without
real_rate, the default timeout outlasts two full buffers (schema.py Scenario.timeout).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hostagent.protocol.constants import (
    CONGESTION_HOLDOFF,
    EV_PROBE_TIMEOUT,
    HOLDOFF_RTTS,
    PROBE_INTERVAL,
    PROBE_TIMEOUT_INTERVALS,
)
from hostagent.protocol.qp import MAX_RETRY_INTERVAL, QPConfig, time_to_fail
from testbed.errors import ScenarioError
from testbed.fabric.dcqcn_gains import gains
from testbed.fabric.departures import Departure
from testbed.fabric.frame import Frame
from testbed.fabric.latency import ACROSS_A_SPINE, round_trip
from testbed.scenario import Scenario
from testbed.scenario.schema import Transport
from testbed.scenario.units import format_time

MRC_TIMERS = ("mrc.probe_interval", "mrc.probe_timeout", "mrc.congestion_holdoff")


@dataclass(frozen=True)
class Timers:
    """What a transport's QPs and EV sets run with, emulated seconds (the MRC timers are the
    EV set's, unused by RoCEv2), and every departure from the real fabric's values."""

    transport: str
    timeout: float
    linear_cnt: int
    exp_cnt: int
    max_retry_interval: float  # where the doubling stops
    probe_interval: float
    probe_timeout: float
    congestion_holdoff: float
    departures: tuple[Departure, ...]

    def time_to_fail(self) -> float:
        """Emulated seconds from a packet's send until its QP gives up, no ACK ever coming."""
        return time_to_fail(self.qp_config())

    def qp_config(self, **settings: Any) -> QPConfig:
        """A QPConfig with these timers and the other `settings`."""
        return QPConfig(timeout=self.timeout, linear_cnt=self.linear_cnt, exp_cnt=self.exp_cnt,
                        max_retry_interval=self.max_retry_interval, **settings)

    def longest_wait(self) -> float:
        """Emulated seconds a QP may wait on a dead path: its retry schedule, or with retries
        forever its fixed-interval part (the doubling never ends)."""
        ttf = self.time_to_fail()
        return ttf if math.isfinite(ttf) else self.timeout * (self.linear_cnt + 1)


def base_rtt(scenario: Scenario) -> float:
    """The base RTT across a spine in the scenario's frame (real seconds with real_rate)."""
    return Frame.of(scenario).in_real(round_trip(scenario, ACROSS_A_SPINE))


def timeout_field(scenario: Scenario) -> str:
    """The field that states the ACK timeout, or says it is the default."""
    q = scenario.qp
    if q.timeout is not None:
        return "qp.timeout"
    return "qp.timeout_exp" if q.timeout_exp is not None else "qp.timeout (default)"


def stated(scenario: Scenario, transport: Transport) -> dict[str, float]:
    """Each timer as the scenario states it (or its default), seconds in the scenario's frame."""
    m, real = scenario.mrc, scenario.fabric.real_rate is not None
    probe_timeout = (m.probe_timeout if m.probe_timeout is not None
                     else EV_PROBE_TIMEOUT if real else None)
    probe_interval = (m.probe_interval if m.probe_interval is not None
                      else probe_timeout / PROBE_TIMEOUT_INTERVALS
                      if real and probe_timeout is not None else PROBE_INTERVAL)
    holdoff = (m.congestion_holdoff if m.congestion_holdoff is not None
               else HOLDOFF_RTTS * base_rtt(scenario) if real else CONGESTION_HOLDOFF)
    return {"qp.timeout": scenario.timeout(transport),
            "mrc.probe_interval": probe_interval,
            "mrc.probe_timeout": (probe_timeout if probe_timeout is not None
                                  else PROBE_TIMEOUT_INTERVALS * probe_interval),
            "mrc.congestion_holdoff": holdoff}


def timers(scenario: Scenario, transport: Transport) -> Timers:
    """The timers `transport` runs with, emulated, and how they depart from the real fabric:
    compressions (with fabric.real_rate and qp.compress_above_rtts) and DCQCN's gains."""
    frame = Frame.of(scenario)
    linear, exp = scenario.retry_schedule(transport)
    n = scenario.qp.compress_above_rtts
    rtt = base_rtt(scenario)
    bound = n * rtt if frame.real and n is not None else math.inf
    used, departures = {}, []
    for name, seconds in stated(scenario, transport).items():
        if seconds > bound and (transport == "mrc" or name not in MRC_TIMERS):
            label = f"{transport} {timeout_field(scenario)}" if name == "qp.timeout" else name
            departures.append(Departure(
                label, format_time(seconds), format_time(bound),
                f"compressed to qp.compress_above_rtts = {n:g} base RTTs of {format_time(rtt)}"
                f": run D = {frame.dilation:,.0f} times longer it would take "
                f"{format_time(frame.emulated(seconds))}"))
        used[name] = min(seconds, bound)
    given = stated(scenario, transport)["qp.timeout"]
    if used["qp.timeout"] < given:
        departures.append(Departure(
            f"{transport} retry schedule (time to give up)", _give_up(given, linear, exp),
            _give_up(used["qp.timeout"], linear, exp),
            "follows the ACK timeout's compression: the same retries from the shorter timeout"))
    if transport == "rocev2":
        departures += gains(scenario)[1]
    interval, probe, holdoff = (frame.emulated(used[k]) for k in MRC_TIMERS)
    return Timers(transport, frame.emulated(used["qp.timeout"]), linear, exp,
                  frame.emulated(MAX_RETRY_INTERVAL), interval, probe, holdoff,
                  tuple(departures))


def _give_up(timeout: float, linear: int, exp: int) -> str:
    """The time a QP of this schedule waits on a dead path, in the timeout's frame."""
    ttf = time_to_fail(QPConfig(timeout=timeout, linear_cnt=linear, exp_cnt=exp))
    return format_time(ttf) if math.isfinite(ttf) else "never (retries forever)"


def check(scenario: Scenario, source: str) -> None:
    """Refuse a scenario whose QPs could wait on a dead path longer than max_wall_time
    (`Timers.longest_wait`), with the arithmetic and the fixes. Raises `ScenarioError`."""
    frame, limit = Frame.of(scenario), scenario.max_wall_time
    problems, fits = [], []
    for transport in scenario.transport:
        t = timers(scenario, transport)
        wait = t.longest_wait()
        if wait <= limit:
            continue
        retries = f"{t.linear_cnt} retries at a fixed interval" + (
            f", then {t.exp_cnt} doubling" if t.exp_cnt else "") + (
            " (retries forever: the fixed ones counted)" if wait < t.time_to_fail() else "")
        real, given = frame.in_real(wait), scenario.timeout(transport)
        used = frame.in_real(t.timeout)
        compressed = f", compressed to {format_time(used)}" if used < given else ""
        problems.append(
            f"{transport}: {timeout_field(scenario)} {format_time(given)}{compressed}"
            f"{' of the real fabric' if frame.real else ''}, the first send and {retries}: "
            f"a QP waits {format_time(real)} on a dead path"
            + (f", x D {frame.dilation:,.0f} = {format_time(wait)} emulated" if frame.real
               else ""))
        fits.append(limit / (frame.dilation * base_rtt(scenario) * real / frame.in_real(
            t.timeout)))
    if problems:
        compress = (f"set qp.compress_above_rtts (timers above that many base RTTs, "
                    f"{format_time(base_rtt(scenario))} each, run at that many; at most "
                    f"{math.floor(min(fits)):,} fits), " if frame.real else "")
        raise ScenarioError(
            f"{source}: transport timers longer than max_wall_time ({format_time(limit)}): "
            + "; ".join(problems),
            f"{compress}give a shorter qp.timeout or fewer retries, or raise max_wall_time")


def lines(scenario: Scenario) -> list[str]:
    """Each transport's timers (real and emulated), its departures, and a warning where the
    ACK timeout does not exceed the round trip, for `validate`."""
    frame = Frame.of(scenario)

    def both(seconds: float) -> str:
        real = f" ({format_time(seconds)} emulated)" if frame.real else ""
        return f"{format_time(frame.in_real(seconds))}{real}"
    out = []
    rtt = round_trip(scenario, ACROSS_A_SPINE)
    for transport in scenario.transport:
        t = timers(scenario, transport)
        doubling = f" then {t.exp_cnt} doubling" if t.exp_cnt else " at a fixed interval"
        extra = (f"; probes every {both(t.probe_interval)}, timeout {both(t.probe_timeout)}, "
                 f"holdoff {both(t.congestion_holdoff)}" if transport == "mrc" else "")
        out.append(f"{transport} timers: ACK timeout {both(t.timeout)}, {t.linear_cnt} "
                   f"retries{doubling}{extra}")
        out += [f"  departure: {d.quantity} {d.used} instead of {d.stated}"
                for d in t.departures]
        if t.timeout <= rtt:
            out.append(f"warning: the {transport} ACK timeout ({both(t.timeout)}) is not above "
                       f"the round trip across a spine ({both(rtt)}): every packet would time "
                       f"out; set qp.timeout above it")
    return out
