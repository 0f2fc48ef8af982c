"""How long a run will take on this machine, estimated before anything is built (pure).

A dilated fabric runs D times slower than the real one it stands for, so a scenario stated in
the real frame can ask for hours without saying so. The estimate is the workload at the ideal
rate (a lower bound: the busiest rank's bytes over what it injects on its planes, one path
latency per step on the algorithm's longest chain (hostagent/workloads/algorithms.py), the
compute, all emulated) or the fault timeline and background flows, whichever ends later; once
per transport, each on its own fabric (with several jobs: the longest job, from its start, then
each job alone, its control); building and verifying the fabric not counted. A
scenario whose estimate passes its `max_wall_time` is refused with the arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from hostagent.workloads import algorithms
from hostagent.workloads.algorithms import Algorithm
from testbed.errors import ScenarioError
from testbed.fabric.frame import Frame
from testbed.fabric.latency import ACROSS_A_SPINE, one_way_latency
from testbed.run import algorithm
from testbed.run.traffic import step_job
from testbed.scenario import Scenario
from testbed.scenario.faults import Fault
from testbed.scenario.job_views import views
from testbed.scenario.schema import Transport
from testbed.scenario.units import format_rate, format_size, format_time


@dataclass(frozen=True)
class TransportTime:
    """One transport's run: its workload's iterations, each its bytes at the ideal rate, its
    latency-bound steps and its compute, all emulated seconds."""

    transport: str  # its label: the transport, and the job where there are several
    iterations: int
    bytes: float  # a rank's bytes per iteration (the busiest rank of a step graph)
    rate: float  # bit/s a rank injects: its planes x the host link's rate
    steps: int  # per iteration, each waiting at least one path latency
    latency: float  # s, one way across a spine
    compute: float  # s, emulated: a compute gap, or a step's compute (its slowest rank's)
    computes: int  # how many: a gap between iterations, or one per step
    start: float = 0.0  # s, emulated: a job's start after the common start

    @property
    def per_iteration(self) -> float:
        return self.bytes * 8 / self.rate + self.steps * self.latency

    @property
    def workload(self) -> float:
        return self.start + self.iterations * self.per_iteration + self.computes * self.compute


@dataclass(frozen=True)
class WallTime:
    """The estimate and its terms (emulated seconds)."""

    dilation: float
    runs: tuple[tuple[TransportTime, ...], ...]  # each fabric's run: its jobs, together
    faults: float  # when the last fault action happens
    background: float  # when the last background flow ends
    limit: float  # max_wall_time

    @property
    def total(self) -> float:
        return sum(max(*(t.workload for t in run), self.faults, self.background)
                   for run in self.runs)

    def lines(self) -> list[str]:
        """The arithmetic, in the order a reader checks it."""
        d = f" x D {self.dilation:,.0f}" if self.dilation != 1 else ""
        out = []
        jobs = any(len(run) > 1 for run in self.runs)
        for run in self.runs:
            for t in run:
                compute = (f" + {t.computes} x compute {format_time(t.compute)}" if t.compute
                           else "")
                start = f"start {format_time(t.start)} + " if t.start else ""
                alone = " (alone)" if len(run) == 1 and jobs else ""
                out.append(
                    f"{t.transport}{alone}: {start}{t.iterations} iterations x ("
                    f"{format_size(t.bytes)} x 8 / {format_rate(t.rate)} + {t.steps} steps x "
                    f"latency {format_time(t.latency)}){compute} = {format_time(t.workload)}")
        out.append(f"faults end at {format_time(self.faults)}, background flows at "
                   f"{format_time(self.background)} (stated times{d})")
        runs = len(self.runs)
        how = (f"per run the longer of its longest job and the timeline, {runs} runs (per "
               f"transport: the jobs together, then each alone)" if jobs else
               f"per transport the longer of its workload and the timeline, {runs} transport"
               f"{'s' if runs > 1 else ''}")
        out.append(f"wall time >= {format_time(self.total)}: {how} (building and verifying "
                   f"not counted); limit {format_time(self.limit)} (max_wall_time)")
        return out


def _end(fault: Fault) -> float:
    """When a fault's last action happens (s after the start, in its frame)."""
    if fault.kind == "flap" and fault.period is not None:
        return fault.at + fault.flap_cycles() * fault.period
    return fault.at + (fault.duration or 0.0)


def _transport(scenario: Scenario, transport: Transport, frame: Frame, label: str | None = None,
               start: float = 0.0) -> TransportTime:
    w = scenario.workload
    iterations = w.iterations + w.warmup
    rate = scenario.ideal_busbw(transport)[1] * scenario.fabric.host_link.rate
    latency = one_way_latency(scenario, ACROSS_A_SPINE)
    job = step_job(scenario)
    if job is None:
        ranks = len(scenario.rank_hosts())
        chosen = cast(Algorithm, algorithm.resolve(scenario).algorithm)
        return TransportTime(label or transport, iterations,
                             algorithms.port_bytes(w.collective, chosen, w.size, ranks), rate,
                             algorithms.latency_steps(w.collective, chosen, ranks) or 1, latency,
                             frame.compute_gap(scenario), iterations - 1, start)
    busiest = max(job.graphs, key=lambda g: sum(n.bytes for n in g.nodes))
    return TransportTime(
        label or transport, iterations, sum(n.bytes for n in busiest.nodes), rate,
        sum(1 for n in busiest.nodes if n.bytes), latency,
        max(frame.emulated(sum(n.duration for n in g.nodes)) for g in job.graphs), iterations,
        start)


def estimate(scenario: Scenario) -> WallTime:
    """The run's wall time from the scenario at the rate it will run at."""
    frame = Frame.of(scenario)
    runs: list[tuple[TransportTime, ...]] = []
    for t in scenario.transport:
        if not scenario.jobs:
            runs.append((_transport(scenario, t, frame),))
            continue
        together = tuple(_transport(v.scenario, v.transport_in(t), frame,
                                    f"{v.transport_in(t)} job {v.name}", frame.emulated(v.start))
                         for v in views(scenario))
        runs += [together, *((x,) for x in together)]  # then each alone: its control
    return WallTime(
        frame.dilation, tuple(runs),
        max((_end(f) for f in frame.faults(scenario.faults)), default=0.0),
        max((b.at + b.duration for b in frame.background(scenario.background)), default=0.0),
        scenario.max_wall_time)


def check(scenario: Scenario, source: str) -> WallTime:
    """The estimate, or a `ScenarioError` with its arithmetic when it passes max_wall_time."""
    found = estimate(scenario)
    if found.total > found.limit:
        raise ScenarioError(
            f"{source}: the run would take at least {format_time(found.total)} of wall time, "
            f"more than max_wall_time ({format_time(found.limit)}):\n"
            + "\n".join(f"  {line}" for line in found.lines()),
            f"raise max_wall_time (e.g. `max_wall_time: {_hours(found.total)}`) if that "
            f"is meant, or lower the iterations, the stated times or the dilation "
            f"(fabric.real_rate over the host link's rate)")
    return found


def _hours(seconds: float) -> str:
    """A round bound above `seconds`, as a scenario would write it."""
    return f"{-(-seconds // 3600):.0f}h"
