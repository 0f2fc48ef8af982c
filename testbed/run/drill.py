"""Running drills: per drill and transport, the control runs (the scenario without its
faults: one before each repetition, on its seed, or one on the first seed) and the
repetitions, each a normal run in a folder of its own, with progress a person can plan around
(which drill, transport, repetition, elapsed, about how long is left).

Judging the runs is the analysis layer's (analysis/objectives.py); the CLI wires the two.
A run whose agents failed (a QP out of retries, a rank that could not verify) is a drill
result, kept and judged; a fabric that cannot be built or verified, or a machine that cannot
run it, stops every drill.
"""
from __future__ import annotations

import re
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
    """The folders of one drill's runs of one transport. Paired: `controls[k]` is
    `repetitions[k]`'s own control, on its seed; otherwise every control serves every
    repetition."""

    drill: LoadedDrill
    transport: str
    controls: list[Path] = field(default_factory=list)
    repetitions: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # runs that ended with an error
    paired: bool = False


@dataclass
class _Step:
    drill: LoadedDrill
    index: int  # of the drill among those run
    transport: str
    repetition: int  # the repetition run, or the one a control is run for
    seed: int
    control: bool = False
    paired: bool = False  # a control of its repetition's own, not of the first seed's

    @property
    def folder(self) -> str:
        if not self.control:
            return f"rep{self.repetition + 1}"
        return f"control{self.repetition + 1}" if self.paired else "control"


def plan(drills: list[LoadedDrill]) -> list[_Step]:
    """Every run of every drill, in the order they run: per transport one repetition per
    seed, the same seeds for every transport, each right after its own control
    (`every_seed`), or all after one control on the first seed (`first_seed`)."""
    steps = []
    for k, d in enumerate(drills):
        seeds = d.drill.run_seeds(d.scenario)
        mode = d.drill.control if d.scenario.faults or d.scenario.background else "none"
        for transport in d.transports:
            if mode == "first_seed":
                steps.append(_Step(d, k, transport, 0, seeds[0], control=True))
            for r, seed in enumerate(seeds):
                if mode == "every_seed":
                    steps.append(_Step(d, k, transport, r, seed, control=True, paired=True))
                steps.append(_Step(d, k, transport, r, seed))
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
    errors: dict[tuple[int, str], list[str]] = {}
    started = time.monotonic()
    durations: list[float] = []
    for n, step in enumerate(steps):
        d = step.drill
        failed = errors.setdefault((step.index, step.transport), [])
        what = (f"repetition {step.repetition + 1}/{d.drill.repetitions}" if not step.control
                else f"control {step.repetition + 1}/{d.drill.repetitions} (no faults, no "
                     f"background)" if step.paired else "control (no faults, no background)")
        elapsed = time.monotonic() - started
        left = (f"about {_fmt(sum(durations) / len(durations) * (len(steps) - n))} left"
                if durations else "estimating")
        progress.say(f"drill {step.index + 1}/{len(drills)} {d.drill.name}: {step.transport} "
                     f"{what}, seed {step.seed}  [run {n + 1}/{len(steps)}, "
                     f"{_fmt(elapsed)} elapsed, {left}]")
        scenario, text = d.variant(step.transport, step.seed, faults=not step.control)
        folder = base / d.drill.name / step.transport / step.folder
        folder.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        try:
            run(scenario, text, RunOptions(folder), Progress(quiet=not show_runs))
        except (ScenarioError, EnvironmentProblem, VerificationFailed):
            raise
        except TestbedError as exc:  # the agents failed: a result to judge, not a crash
            failed.append(f"{folder}: {exc}")
            progress.say(f"  run ended with an error (judged as it is): {exc}")
        durations.append(time.monotonic() - t)
    progress.say(f"drills: {len(steps)} runs in {_fmt(time.monotonic() - started)}")
    out = []
    for (k, transport), failed in errors.items():
        runs = _collect(drills[k], transport, base / drills[k].drill.name / transport)
        runs.errors = failed
        out.append(runs)
    return out


def _collect(d: LoadedDrill, transport: str, folder: Path) -> TransportRuns:
    """The runs in one drill's folder of one transport (each subfolder's latest run), in
    repetition order. `controlN` folders pair with `repN`; the half of a pair that left no run
    stands as its folder, which the judge finds without data (a failure, not a repetition
    silently judged against nothing)."""
    runs: dict[str, dict[int, Path]] = {"rep": {}, "control": {}}
    shared: list[Path] = []
    for sub in folder.iterdir() if folder.is_dir() else []:
        made = sorted(p for p in sub.iterdir() if p.is_dir())
        name = re.fullmatch(r"(rep|control)(\d+)", sub.name)
        if made and sub.name == "control":
            shared.append(made[-1])
        elif made and name:
            runs[name[1]][int(name[2])] = made[-1]
    reps, controls = runs["rep"], runs["control"]
    if not controls:
        return TransportRuns(d, transport, shared, [reps[k] for k in sorted(reps)])
    every = sorted(reps.keys() | controls.keys())
    return TransportRuns(d, transport,
                         [controls.get(k, folder / f"control{k}") for k in every],
                         [reps.get(k, folder / f"rep{k}") for k in every], paired=True)


def found(drills: list[LoadedDrill], base: Path) -> list[TransportRuns]:
    """The runs an earlier `run_drills` left in `base`, to judge them again (after the
    objectives changed, or the fidelity monitor judged the runs), paired as they were run."""
    out = []
    for d in drills:
        for transport in d.transports:
            folder = base / d.drill.name / transport
            runs = _collect(d, transport, folder)
            if not runs.repetitions:
                raise ScenarioError(f"{folder}: no runs of drill {d.drill.name} over "
                                    f"{transport} here",
                                    "give the folder `mrc-testbed drill` wrote "
                                    "(results/<utc>-drills)")
            out.append(runs)
    return out
