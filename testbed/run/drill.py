"""Running drills: per drill and transport, a control run (the scenario without its faults)
and the repetitions, each a normal run in a folder of its own, with progress a person can
plan around (which drill, transport, repetition, elapsed, about how long is left).

Judging the runs is the analysis layer's (analysis/objectives.py); the CLI wires the two.
A run whose agents failed (a QP out of retries, a rank that could not verify) is a drill
result, kept and judged; a fabric that cannot be built or verified, or a machine that cannot
run it, stops every drill.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from testbed.errors import EnvironmentProblem, ScenarioError, TestbedError, VerificationFailed
from testbed.fabric import timeline
from testbed.lifecycle.progress import Progress
from testbed.run.runner import RunOptions, run
from testbed.scenario.drill import LoadedDrill


@dataclass
class TransportRuns:
    """The folders of one drill's runs of one transport."""

    drill: LoadedDrill
    transport: str
    controls: list[Path] = field(default_factory=list)
    repetitions: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # runs that ended with an error


@dataclass
class _Step:
    drill: LoadedDrill
    index: int  # of the drill among those run
    transport: str
    repetition: int | None  # None: the control run
    seed: int


def plan(drills: list[LoadedDrill]) -> list[_Step]:
    """Every run of every drill, in the order they run: per transport its control (on the
    first seed) and one repetition per seed, the same seeds for every transport."""
    steps = []
    for k, d in enumerate(drills):
        seeds = d.drill.run_seeds(d.scenario)
        for transport in d.transports:
            if d.drill.control and (d.scenario.faults or d.scenario.background):
                steps.append(_Step(d, k, transport, None, seeds[0]))
            steps += [_Step(d, k, transport, r, seed) for r, seed in enumerate(seeds)]
    return steps


def check(drills: list[LoadedDrill]) -> None:
    """Every run's scenario is valid and its timeline fits its fabric, before anything runs."""
    for d in drills:
        timeline.check(d.scenario, d.source)


def _fmt(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def run_drills(drills: list[LoadedDrill], base: Path, progress: Progress,
               show_runs: bool = False) -> list[TransportRuns]:
    """Run every drill; returns the folders per drill and transport."""
    check(drills)
    steps = plan(drills)
    out: dict[tuple[int, str], TransportRuns] = {}
    started = time.monotonic()
    durations: list[float] = []
    for n, step in enumerate(steps):
        d = step.drill
        key = (step.index, step.transport)
        runs = out.setdefault(key, TransportRuns(d, step.transport))
        what = ("control (no faults, no background)" if step.repetition is None else
                f"repetition {step.repetition + 1}/{d.drill.repetitions}")
        elapsed = time.monotonic() - started
        left = (f"about {_fmt(sum(durations) / len(durations) * (len(steps) - n))} left"
                if durations else "estimating")
        progress.say(f"drill {step.index + 1}/{len(drills)} {d.drill.name}: {step.transport} "
                     f"{what}, seed {step.seed}  [run {n + 1}/{len(steps)}, "
                     f"{_fmt(elapsed)} elapsed, {left}]")
        scenario, text = d.variant(step.transport, step.seed,
                                   faults=step.repetition is not None)
        folder = base / d.drill.name / step.transport / (
            "control" if step.repetition is None else f"rep{step.repetition + 1}")
        folder.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        try:
            run(scenario, text, RunOptions(folder), Progress(quiet=not show_runs))
        except (ScenarioError, EnvironmentProblem, VerificationFailed):
            raise
        except TestbedError as exc:  # the agents failed: a result to judge, not a crash
            runs.errors.append(f"{folder}: {exc}")
            progress.say(f"  run ended with an error (judged as it is): {exc}")
        durations.append(time.monotonic() - t)
        made = sorted(p for p in folder.iterdir() if p.is_dir())
        if made:
            (runs.controls if step.repetition is None else runs.repetitions).append(made[-1])
    progress.say(f"drills: {len(steps)} runs in {_fmt(time.monotonic() - started)}")
    return list(out.values())


def found(drills: list[LoadedDrill], base: Path) -> list[TransportRuns]:
    """The runs an earlier `run_drills` left in `base`, to judge them again (after the
    objectives changed, or the fidelity monitor judged the runs)."""
    out = []
    for d in drills:
        for transport in d.transports:
            folder = base / d.drill.name / transport
            runs = TransportRuns(d, transport)
            for sub in sorted(folder.iterdir()) if folder.is_dir() else []:
                made = sorted(p for p in sub.iterdir() if p.is_dir())
                if made:
                    (runs.controls if sub.name == "control" else runs.repetitions).append(
                        made[-1])
            if not runs.repetitions:
                raise ScenarioError(f"{folder}: no runs of drill {d.drill.name} over "
                                    f"{transport} here",
                                    "give the folder `mrc-testbed drill` wrote "
                                    "(results/<utc>-drills)")
            out.append(runs)
    return out
