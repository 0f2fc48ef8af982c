"""`mrc-testbed calibrate` and `rate: auto`: measure this machine's packet budget on a small real
fabric (the numbers and the cache: testbed/emulation/calibration.py), then choose a scenario's
link rate from it (the arithmetic: testbed/fabric/budget.py).

The caller holds the run lock: the measurement builds a fabric and runs agents on it.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from testbed.emulation import calibration, pilot_readings
from testbed.errors import TestbedError
from testbed.fabric import budget
from testbed.lifecycle.progress import Progress
from testbed.run import pilot
from testbed.run.build import fabric
from testbed.run.traffic import run_agents
from testbed.scenario import Scenario, parse
from testbed.scenario.units import format_rate


def delivered_packets(agents_dir: Path) -> int:
    """Data packets delivered by every QP: sent minus retransmitted (agents' paths.json)."""
    total = 0
    for path in agents_dir.glob("*/paths.json"):
        for q in json.loads(path.read_text()).get("qps", []):
            total += int(q.get("data_sent", 0)) - int(q.get("retransmits", 0))
    return total


def measure(progress: Progress) -> calibration.Calibration:
    """Run the calibration workload on its own fabric; its numbers (not yet cached)."""
    sc = parse(calibration.SCENARIO, "calibration")
    links = budget.links_per_packet(sc)
    marks: dict[str, tuple[float, float]] = {}

    def started(_t0: float) -> None:
        marks["start"] = (time.monotonic(), calibration.machine_cpu()[0])

    with (progress.phase("calibrate") as info,
            fabric(sc, progress, run_id=f"calibrate-{os.getpid()}-{time.monotonic_ns()}") as net,
            tempfile.TemporaryDirectory(prefix="mrc-calibrate-") as tmp):
        agents_dir = Path(tmp) / "agents"
        outcomes = run_agents(net, sc, "mrc", agents_dir, on_start=started)
        end, soft_end = time.monotonic(), calibration.machine_cpu()[0]
        failed = [o for o in outcomes if o.result.get("status") != "ok"]
        if failed or "start" not in marks:
            why = failed[0].result.get("error") if failed else "the agents never started"
            raise TestbedError(f"the calibration workload failed: {why}",
                               "free the machine's CPU and run `mrc-testbed calibrate` again")
        t0, soft0 = marks["start"]
        results = [o.result for o in outcomes]
        split = calibration.agents_cpu_split(results)
        found = calibration.from_measurement(calibration.agents_cpu(results), soft_end - soft0,
                                             delivered_packets(agents_dir), end - t0, links,
                                             agent_user_s=split[0] if split else None)
        info["done"] = found.line()
    return found


def calibrate(progress: Progress, why: str = "asked for") -> calibration.Calibration:
    """Measure and cache; say where."""
    progress.say(f"  calibrate: {why}: measuring this machine's packet budget on a 4-host "
                 f"fabric (about 10 s)")
    found = measure(progress)
    path = calibration.save(found)
    progress.say(f"  calibrate: cached in {path}")
    return found


def choose(scenario: Scenario, progress: Progress, recalibrate: bool = False,
           workload: bool = True) -> tuple[Scenario, dict[str, Any]]:
    """The scenario with its `rate: auto` links at the rate this machine carries, and the
    record for meta.json: the calibration's cost model gives the first rung (calibrating
    first when there is no valid cache, or when asked), the pilot on the scenario's own fabric
    the rung chosen (testbed/run/pilot.py; its cached readings when this shape was piloted).
    A `cluster:` scenario keeps the model's rung: the pilot measures this machine only. So
    does a run without a workload (`workload=False`: --verify-only, --hold, --cli), with no
    traffic to measure, unless a pilot of its shape is cached."""
    found, why = calibration.cached()
    if found is None or recalibrate:
        found = calibrate(progress, why if found is None else "--calibrate")
    else:
        progress.say(f"  calibrate: {why}: {found.line()}")
    choice = budget.choose_rate(scenario, found.cost())
    for line in choice.lines():
        progress.say(f"  {line}")
    record: dict[str, Any] = {"links": list(scenario.auto_links()), "choice": choice.to_json(),
                              "calibration": asdict(found),
                              "cache": str(calibration.cache_path()), "pilot": None}
    rate = choice.rate
    fresh = recalibrate or scenario.cluster is not None
    piloted = None if fresh else pilot_readings.cached(scenario)
    if piloted is None and not workload:
        progress.say("  pilot: not run without a workload (no traffic to measure): the "
                     "model's rung stands")
    elif scenario.cluster is None:
        if piloted is None:
            progress.say(f"  pilot: this scenario's fabric and workload, whole iterations "
                         f"after the first ({pilot_readings.WINDOW_S:g}-"
                         f"{pilot_readings.WINDOW_MAX_S:g} s) a transport, from "
                         f"{format_rate(choice.rate)}")
            piloted = pilot.run_pilot(scenario, choice.rate, progress)
            progress.say(f"  pilot: cached in {pilot_readings.save(piloted)}")
            lines = piloted.lines()[-1:]  # the readings were said as they were taken
        else:
            progress.say(f"  pilot: cached ({pilot_readings.cache_path(piloted.shape)})")
            lines = piloted.lines()
        for line in lines:
            progress.say(f"  {line}")
        rate, record["pilot"] = piloted.rate, piloted.to_json()
    else:
        progress.say("  pilot: not run for a cluster scenario (it measures this machine only): "
                     "the model's rung stands")
    return scenario.with_rate(rate, scenario.name), record
