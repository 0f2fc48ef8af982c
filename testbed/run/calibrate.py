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

from testbed.emulation import calibration
from testbed.errors import TestbedError
from testbed.fabric import budget
from testbed.lifecycle.progress import Progress
from testbed.run.build import fabric
from testbed.run.traffic import run_agents
from testbed.scenario import Scenario, parse


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

    with progress.phase("calibrate") as info, \
            fabric(sc, progress, run_id=f"calibrate-{os.getpid()}-{time.monotonic_ns()}") as net, \
            tempfile.TemporaryDirectory(prefix="mrc-calibrate-") as tmp:
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


def choose(scenario: Scenario, progress: Progress,
           recalibrate: bool = False) -> tuple[Scenario, dict[str, Any]]:
    """The scenario with its `rate: auto` links at the rate this machine carries (calibrating
    first when there is no valid cache, or when asked), and the record for meta.json."""
    found, why = calibration.cached()
    if found is None or recalibrate:
        found = calibrate(progress, why if found is None else "--calibrate")
    else:
        progress.say(f"  calibrate: {why}: {found.line()}")
    choice = budget.choose_rate(scenario, found.cost())
    for line in choice.lines():
        progress.say(f"  {line}")
    resolved = scenario.with_rate(choice.rate, scenario.name)
    return resolved, {"links": list(scenario.auto_links()), "choice": choice.to_json(),
                      "calibration": asdict(found), "cache": str(calibration.cache_path())}
