"""`rate: auto`'s pilot readings and their cache: what the pilot (testbed/run/pilot.py)
measured at each rung, the rung chosen, and where it is kept per machine, kernel, agent code
and scenario shape. Apart from the measurement so that `validate` reads the cache without
root and without Mininet, as testbed/emulation/calibration.py is for the calibration.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed.emulation import calibration
from testbed.fabric import budget
from testbed.lifecycle.files import write_json
from testbed.scenario import Scenario
from testbed.scenario.units import format_rate

SETTLE_S = 1.0  # s after the common start never measured: connections, the first writes
WINDOW_S = 4.0  # s measured at least: whole iterations (shorter when the workload ends sooner)
WINDOW_MAX_S = 12.0  # s measured at most: an iteration longer than this is measured in part
MIN_WINDOW_S = 1.0  # a workload done sooner than SETTLE_S + this is measured from its start
# The window opens when every rank has completed its first iteration (a steady state: a 64-host
# RoCEv2 ring at 500 kbit/s kept the machine 46% busy in its first 6 s and 57-62% from then
# on), but no later than this after the start, so that a slow rung's pilot stays short; it
# closes at an iteration's end, so that the burst between iterations (the agents check the
# result and make the next buffers) weighs as it does in a run.
FIRST_ITERATION_MAX_S = 30.0
IGNORED = ("name", "description", "faults", "background", "verify",  # not the load's shape
           "max_wall_time")
METHOD = ("machine busy over whole iterations from the first one's end, WINDOW_S to "
          "WINDOW_MAX_S (from SETTLE_S at least, FIRST_ITERATION_MAX_S at most), or to the "
          "last iteration's")  # in the key


def window(start: float, done: list[float], end: float) -> tuple[float, float]:
    """The measured window of a pilot whose agents started at `start`, had every rank complete
    iterations 1, 2, ... at `done` and were stopped, or ended their last iteration, at `end`:
    from the first iteration's end (SETTLE_S at least, FIRST_ITERATION_MAX_S at most) to the
    first iteration end WINDOW_S or more later, WINDOW_MAX_S at most; a workload too short
    for MIN_WINDOW_S of that is measured from SETTLE_S, or from its start, to `end`."""
    opens = _opens(start, done)
    closes = next((t for t in done if t >= opens + WINDOW_S), end)
    closes = min(closes, end, opens + WINDOW_MAX_S)
    if closes - opens < MIN_WINDOW_S:
        return (start + SETTLE_S if end - start >= SETTLE_S + MIN_WINDOW_S else start), end
    return opens, closes


def window_closed(start: float, done: list[float], now: float) -> bool:
    """Whether the pilot has what it measures, and stops the agents (`window`'s rule)."""
    opens = _opens(start, done)
    return any(t >= opens + WINDOW_S for t in done) or now >= opens + WINDOW_MAX_S


def _opens(start: float, done: list[float]) -> float:
    first = done[0] if done else float("inf")
    return max(start + SETTLE_S, min(first, start + FIRST_ITERATION_MAX_S))


@dataclass(frozen=True)
class Reading:
    """One transport at one rung: the machine's busy share over the measured window."""

    rate: int
    transport: str
    busy: float
    window_s: float


@dataclass
class PilotResult:
    """Every reading, the rung chosen and whether it fits (cached, and in meta.json)."""

    rate: int
    fits: bool
    share: float
    readings: list[Reading] = field(default_factory=list)
    shape: str = ""
    measured: str = ""

    def shares(self) -> dict[int, float]:
        """Rung -> the heaviest transport's busy share there."""
        out: dict[int, float] = {}
        for r in self.readings:
            out[r.rate] = max(out.get(r.rate, 0.0), r.busy)
        return out

    def lines(self) -> list[str]:
        by_rate: dict[int, list[Reading]] = {}
        for r in self.readings:
            by_rate.setdefault(r.rate, []).append(r)
        lines = [f"pilot {format_rate(rate)}: " + ", ".join(
                     f"{r.transport} {r.busy:.0%}" for r in rs) + " of the cores busy"
                 for rate, rs in sorted(by_rate.items())]
        verdict = (f"rate auto: {format_rate(self.rate)} (the highest rung measured within "
                   f"{self.share:.0%})" if self.fits else
                   f"rate auto: {format_rate(self.rate)}, the lowest rung, is OVER "
                   f"{self.share:.0%} (the run will likely be not faithful: fewer ranks, fewer "
                   f"planes or larger packets would fit)")
        return [*lines, verdict]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def shape(scenario: Scenario) -> str:
    """A digest of what sets the scenario's load per rung (fabric, workload, transports,
    agents, telemetry: everything but its name, faults, background and probes) and of the
    agents' code and build."""
    data = scenario.model_dump(mode="json")
    for key in IGNORED:
        data.pop(key, None)
    data["workload"].pop("iterations", None)  # the pilot measures its first 4-12 s after the
    # first iteration: iterations beyond those change nothing it reads
    text = json.dumps(data, sort_keys=True) + calibration.agent_code()
    text += repr((budget.PILOT_SHARE, SETTLE_S, WINDOW_S, WINDOW_MAX_S, FIRST_ITERATION_MAX_S,
                  METHOD))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(digest: str) -> Path:
    return calibration.CACHE_DIR / (f"pilot-{calibration.machine_id()}-"
                                    f"{os.uname().release}-{digest}.json")


def cached(scenario: Scenario) -> PilotResult | None:
    """The pilot of this scenario's shape on this machine, kernel and agent code, if any."""
    digest = shape(scenario)
    try:
        data = json.loads(cache_path(digest).read_text())
        data["readings"] = [Reading(**r) for r in data["readings"]]
        found = PilotResult(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return found if found.shape == digest else None


def save(result: PilotResult) -> Path:
    path = cache_path(result.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, result.to_json())
    return path
