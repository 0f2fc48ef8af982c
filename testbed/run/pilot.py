"""`rate: auto` at the operating point: the scenario's own fabric and workload, run for a few
seconds at a rung of the ladder, and the machine's busy share measured while they run.

The calibration (testbed/emulation/calibration.py) measures a packet's cost on a 4-host fabric
at 50 Mbit/s, and its cost model (testbed/fabric/budget.py) gives the first rung to try. A
packet does not cost the same on a large fabric at a low rate: one wake-up serves fewer packets,
a process serves more hosts and QPs, and the runner's telemetry sweeps more ports. Measured
with `bench/scale.py` against the calibration of the same machine, a 64-host fabric at 1 Mbit/s
cost 0.8x the calibration's agent CPU per packet on one machine and 1.4x on another. So the
rung is chosen by measuring: the pilot runs each of the scenario's transports on one fabric
(built at the first rung, its auto links re-shaped in place for the others), with the
runner's telemetry and fidelity monitor running as in a run, and reads the machine's busy
share over whole iterations (4-12 s) from the moment every rank has completed its first one
(`pilot_readings.window`: a steady state, not the first seconds; the verdict's run-CPU share
is bounded by it), then stops the agents. `budget.pilot_step` picks the next rung or the
choice.

Faults and background traffic are left out: the pilot measures the workload's own load. The
readings and their cache (per machine, kernel, agent code and scenario shape, so a scenario is
piloted once) are in testbed/emulation/pilot_readings.py.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from testbed.emulation.cpu import summarize
from testbed.emulation.fidelity_monitor import FidelityMonitor
from testbed.emulation.network_api import Network
from testbed.emulation.pilot_readings import (
    PilotResult,
    Reading,
    shape,
    window,
    window_closed,
)
from testbed.emulation.telemetry import Sampler
from testbed.errors import TestbedError
from testbed.fabric import budget
from testbed.lifecycle.progress import Progress
from testbed.run.build import fabric
from testbed.run.traffic import parts, run_jobs
from testbed.scenario import Scenario
from testbed.scenario.schema import Transport
from testbed.scenario.units import format_rate


def reshape(network: Network, scenario: Scenario, rate: int) -> None:
    """Every port of the scenario's `rate: auto` link classes shaped at `rate`, in place."""
    auto = set(scenario.auto_links())
    for link in network.plan.links:
        if f"{link.kind}_link" in auto:
            for port in (link.lower, link.upper):
                network.set_port_rate(port, link, rate)


def measure(network: Network, scenario: Scenario, transport: Transport, rate: int) -> Reading:
    """Run `scenario` (its auto links already at `rate`) over `transport` for the window,
    with the run's telemetry and monitor, and read the machine's busy share over it."""
    marks: dict[str, float] = {}
    sampler = Sampler(network, scenario.telemetry.period)
    monitor = FidelityMonitor(network)
    with tempfile.TemporaryDirectory(prefix="mrc-pilot-") as tmp:
        monitor.start()
        sampler.start()
        every = parts(scenario, transport, Path(tmp) / "agents")  # with jobs, all together
        first = every[0].out  # the window follows the first job's iterations
        try:
            outcomes = [o for group in run_jobs(
                network, every, on_start=lambda t0: marks.update(start=t0),
                stop_when=lambda now, done: window_closed(marks["start"], done, now))
                for o in group]
            marks["end"] = time.time()
        finally:
            sampler.stop()
            monitor.stop()
        if not any("stopped_by_runner" in o.result for o in outcomes):
            # done within the window: it ends with the last iteration, not with the agents'
            # writing their files and exiting (a burst of CPU that is not the traffic's)
            marks["end"] = min(marks["end"], traffic_end(first) or marks["end"])
        done = iterations_done(first)
    failed = [o for o in outcomes
              if o.result.get("status") != "ok" and "stopped_by_runner" not in o.result]
    if failed or "start" not in marks:
        why = f"{failed[0].host}: {failed[0].result.get('error')}" if failed else "no start"
        raise TestbedError(f"rate auto's pilot over {transport} at {format_rate(rate)} "
                           f"failed: {why}",
                           "the scenario's own run would fail alike: run it at a fixed rate "
                           "to see its agents' logs")
    start, end = window(marks["start"], done, marks["end"])
    rows = sorted((r for m in monitor.machines for r in m.cpu_rows), key=lambda r: r["time"])
    last = next((i for i, r in enumerate(rows) if r["time"] >= end), len(rows) - 1)
    busy = summarize(rows[:last + 1], start)["busy_mean"]  # to the sample holding the end
    if busy is None:
        raise TestbedError("rate auto's pilot read no CPU samples over its window",
                           "run again on a machine whose /proc/stat is readable")
    return Reading(rate, transport, busy, round(end - start, 3))


def _iteration_ends(agents_dir: Path) -> list[list[float]]:
    """Each host's iteration ends, in order (wall clock, its iterations.json)."""
    hosts: list[list[float]] = []
    for path in agents_dir.glob("*/iterations.json"):
        try:
            hosts.append([r["end"] for r in json.loads(path.read_text())
                          if r.get("end") is not None])
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return hosts


def traffic_end(agents_dir: Path) -> float | None:
    """When the last iteration of any host ended; None when none did."""
    return max((end for ends in _iteration_ends(agents_dir) for end in ends), default=None)


def iterations_done(agents_dir: Path) -> list[float]:
    """When every host had completed its 1st, 2nd, ... iteration (the last host's end of each)."""
    hosts = _iteration_ends(agents_dir)
    return [max(ends[k] for ends in hosts) for k in range(min(map(len, hosts), default=0))]


def run_pilot(scenario: Scenario, first: int, progress: Progress) -> PilotResult:
    """Pilot `scenario` (with `rate: auto` links) from rung `first` until a rung is chosen."""
    result = PilotResult(rate=first, fits=True, share=budget.PILOT_SHARE, shape=shape(scenario))
    rate: int | None = first
    with (progress.phase("pilot") as info,
            fabric(_at(scenario, first), progress,
                   run_id=f"pilot-{os.getpid()}-{time.monotonic_ns()}") as net):
        shaped = first
        while rate is not None:
            if rate != shaped:
                reshape(net, scenario, rate)
                shaped = rate
            at = _at(scenario, rate)
            for transport in scenario.transport:
                reading = measure(net, at, transport, rate)
                result.readings.append(reading)
                progress.say(f"  pilot {format_rate(rate)} over {transport}: "
                             f"{reading.busy:.0%} of the cores busy")
                if reading.busy > budget.PILOT_SHARE:
                    break  # over already: the other transport cannot bring it within
            step = budget.pilot_step(result.shares(), budget.PILOT_SHARE)
            rate = step.measure
            if rate is None:
                result.rate, result.fits = step.rate or first, step.fits
        info["done"] = f"{len(result.readings)} measurements, {format_rate(result.rate)} chosen"
    result.measured = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return result


def _at(scenario: Scenario, rate: int) -> Scenario:
    """The scenario at `rate` (validated again there), without its faults and background."""
    return scenario.with_rate(rate, scenario.name).model_copy(
        update={"faults": [], "background": []})
