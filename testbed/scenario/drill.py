"""The drill file: a scenario, the transports to run it over, how many times, and what must
hold for each transport (pure schema).

A drill answers "does this transport meet these objectives under this fault?" with a verdict
per objective. Its scenario is named by path (relative to the drill file) or embedded. Each
repetition runs the scenario with its own seed, and every transport runs the same seeds, so
that a difference between transports is not a difference between draws (which spine a RoCEv2
QP hashes onto, which EVs MRC keeps active). A control run (the same scenario without its
faults and background traffic) measures the steady state the objectives compare with; by
default one per seed, run just before that seed's repetition, since the seed moves the steady
state too and a control measured minutes apart carries the machine's drift. The objectives
themselves are evaluated from the runs' tables by `analysis/objectives.py`, which
reads the plain dict `Objectives.model_dump()` gives (analysis never imports the testbed).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from testbed.errors import ScenarioError
from testbed.scenario.schema import (
    SAFE_NAME_PATTERN,
    Scenario,
    StrictModel,
    Transport,
    format_errors,
    parse,
)
from testbed.scenario.source import load_yaml, read

DRILL_SUFFIXES = (".yaml", ".yml")
STEP_OBJECTIVES = ("step_slowdown", "exposed_ratio")  # need a training-step workload
# What a drill runs: a transport, or RoCEv2 over a lossless fabric (the same scenario with
# `switch: {lossless: true}`, RoCEv2's usual deployment over PFC), as bench/fair.py names them
DrillTransport = Literal["mrc", "rocev2", "rocev2-lossless"]
VARIANTS: dict[str, tuple[Transport, bool]] = {
    "mrc": ("mrc", False), "rocev2": ("rocev2", False), "rocev2-lossless": ("rocev2", True)}
# which control runs a drill makes (Drill.control)
ControlMode = Literal["every_seed", "first_seed", "none"]
# objectives a drill can measure without a limit (`report`): upper bounds, none is met by inf
Reported = Literal["step_slowdown", "exposed_ratio", "cct_p99_ratio", "message_p99_ratio",
                   "max_stall_ms"]


class Objectives(StrictModel):
    """What must hold for one transport. Absent (null) objectives are not judged."""

    verified: bool = Field(True, description="every rank verified every iteration")
    no_failed_qp: bool = Field(True, description="no QP used up its retry budget")
    goodput_ratio: float | None = Field(
        None, gt=0, le=2, description="goodput in the fault window (first fault on to last "
        "off) >= this share of the steady state (the control run's goodput; without a control, "
        "the level before the first fault)")
    cct_p99_ratio: float | None = Field(
        None, gt=0, le=1000, description="collective completion time p99 (every timed "
        "iteration of every repetition) <= this multiple of the steady p50")
    message_p99_ratio: float | None = Field(
        None, gt=0, le=1000, description="write completion time p99 (every write of every "
        "repetition) <= this multiple of the steady p50 of writes")
    recovery_ms: float | None = Field(
        None, gt=0, le=600_000, description="goodput (mean over one iteration) back to 90% "
        "of its level before each fault within this many ms of `recovery_from`")
    recovery_from: Literal["start", "end"] = Field(
        "end", description="count recovery from the fault's start (a transport that should "
        "ride through it, as MRC) or its end (one that waits for it, as RoCEv2)")
    max_stall_ms: float | None = Field(
        None, gt=0, le=600_000, description="no interval longer than this in which no write "
        "of any rank completed (inside the timed iterations)")
    step_slowdown: float | None = Field(
        None, gt=0, le=1000, description="training steps: the mean step time of the timed "
        "steps that overlap the fault window <= this multiple of the steady mean (the "
        "control's steps; without a control, the steps before the first fault), worst "
        "repetition judged")
    exposed_ratio: float | None = Field(
        None, gt=0, le=1000, description="training steps: exposed communication per rank "
        "(not overlapped by its compute) in the fault-window steps <= this multiple of the "
        "steady state's, as step_slowdown")
    faithful: bool = Field(True, description="every run judged faithful by the fidelity "
                                             "monitor (meta.json `fidelity.verdict`); "
                                             "otherwise the drill is inconclusive, never a pass")


class Drill(StrictModel):
    """One drill: a scenario, transports, repetitions and objectives per transport."""

    name: str = Field(pattern=SAFE_NAME_PATTERN, description="used in result folder names")
    description: str = Field("", max_length=500)
    source: str = Field("", max_length=500, description="where its objectives come from "
                                                        "(e.g. the MRC paper's figure)")
    scenario: str | dict[str, Any] = Field(
        description="a scenario file (relative to the drill file) or a scenario, embedded")
    transports: list[DrillTransport] | None = Field(
        None, min_length=1, description="default: the scenario's `transport`; "
        "`rocev2-lossless` runs RoCEv2 with `switch: {lossless: true}`")
    repetitions: int = Field(3, ge=1, le=100, description="default: one per seed, or 3")
    seeds: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] | None = Field(
        None, description="one per repetition, the same for every transport; default the "
                          "scenario's seed + 0, 1, 2, ...")
    control: ControlMode = Field(
        "every_seed", description="the scenario without its faults and background traffic, "
        "the steady state objectives compare with: `every_seed` runs one per repetition, just "
        "before it on its seed, and judges each repetition against its own; `first_seed` one "
        "per transport, on the first seed, for every repetition; `none` compares with each "
        "repetition before its first fault")
    objectives: dict[DrillTransport, Objectives] = Field(
        description="per transport; a transport run without objectives is shown, not judged")
    report: list[Reported] = Field(
        default_factory=list, max_length=5, description="measured for every transport and "
        "shown beside its verdicts, never judged: the rows no source gives a limit for")

    @model_validator(mode="before")
    @classmethod
    def _repetitions_from_seeds(cls, data: Any) -> Any:
        """Seeds given without a repetition count: one repetition per seed."""
        if (isinstance(data, dict) and isinstance(data.get("seeds"), list)
                and "repetitions" not in data):
            return {**data, "repetitions": len(data["seeds"])}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Drill:
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds {self.seeds} repeat a seed: a repetition on a seed "
                             f"already run draws nothing new")
        if self.seeds is not None and len(self.seeds) != self.repetitions:
            raise ValueError(f"seeds has {len(self.seeds)} entries for {self.repetitions} "
                             f"repetitions: give one per repetition, or none")
        if self.transports is not None:
            extra = set(self.objectives) - set(self.transports)
            if extra:
                raise ValueError(f"objectives for {', '.join(sorted(extra))}, which the drill "
                                 f"does not run (transports: {', '.join(self.transports)})")
        return self

    def run_seeds(self, scenario: Scenario) -> list[int]:
        """The seed of each repetition, the same for every transport (and its control's)."""
        if self.seeds is not None:
            return list(self.seeds)
        return [scenario.seed + r for r in range(self.repetitions)]


class LoadedDrill:
    """A drill with its scenario validated, and the scenario's data for the variants run."""

    def __init__(self, drill: Drill, scenario: Scenario, data: dict[str, Any],
                 source: str) -> None:
        self.drill = drill
        self.scenario = scenario
        self.data = data
        self.source = source

    @property
    def transports(self) -> list[str]:
        return list(self.drill.transports or self.scenario.transport)

    def variant(self, transport: str, seed: int, faults: bool = True) -> tuple[Scenario, str]:
        """The scenario as one run of the drill runs it (one transport, its seed; for the
        control, without its faults and background traffic, the disturbances a drill is
        about), and its text as written to the run's folder."""
        name, lossless = VARIANTS[transport]
        data = {**self.data, "transport": [name], "seed": seed}
        if lossless:
            data["switch"] = {**(data.get("switch") or {}), "lossless": True}
        if not faults:
            data["faults"] = []
            data["background"] = []
            data["name"] = f"{self.scenario.name}-control"[:40]
        text = yaml.safe_dump(data, sort_keys=False)
        return parse(text, f"{self.source} ({transport}, seed {seed})"), text


def parse_drill(text: str, source: str, base: Path | None = None) -> LoadedDrill:
    """Validate drill text and its scenario; raise `ScenarioError` listing every problem."""
    data = load_yaml(text, source)  # bounded: size, nesting, expanded nodes
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: the top level must be a mapping of keys")
    try:
        drill = Drill.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_errors(exc, source, Drill, "drill")) from None
    if isinstance(drill.scenario, str):
        path = (base or Path(".")) / drill.scenario
        scenario_text = read(path)
        scenario = parse(scenario_text, f"{source}: scenario {path}", default_name=path.stem)
        scenario_data = load_yaml(scenario_text, str(path)) or {}
        scenario_data.setdefault("name", path.stem)
    else:
        scenario_data = dict(drill.scenario)
        scenario_data.setdefault("name", drill.name)
        scenario = parse(yaml.safe_dump(scenario_data), f"{source}: scenario")
    if scenario.jobs:
        raise ScenarioError(f"{source}: the scenario has jobs; a drill judges one workload "
                            f"against its objectives",
                            "run the scenario (`mrc-testbed run`: each job against its solo "
                            "control), or drill one job's workload as a scenario of its own")
    runs = drill.transports or scenario.transport
    missing = [t for t in drill.objectives if t not in runs]
    if missing:
        raise ScenarioError(f"{source}: objectives for {', '.join(missing)}, which the drill "
                            f"does not run (transports: {', '.join(runs)})")
    if not scenario.workload.steps:
        stepwise = sorted({f"{t}.{k}" for t, o in drill.objectives.items()
                           for k in STEP_OBJECTIVES if getattr(o, k) is not None}
                          | {f"report.{k}" for k in drill.report if k in STEP_OBJECTIVES})
        if stepwise:
            raise ScenarioError(f"{source}: objectives {', '.join(stepwise)} judge training "
                                f"steps, but the scenario's workload is a collective",
                                "give the scenario a workload.training or workload.chakra")
    loaded = LoadedDrill(drill, scenario, scenario_data, source)
    for transport in loaded.transports:  # a variant the scenario cannot take fails here
        loaded.variant(transport, scenario.seed)
    return loaded


def load_drill(path: str | Path) -> LoadedDrill:
    file = Path(path)
    return parse_drill(read(file, "drill"), str(file), file.parent)


def drill_files(paths: list[Path]) -> list[Path]:
    """The drill files named, folders expanded to their *.yaml files in name order."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix in DRILL_SUFFIXES)
            if not found:
                raise ScenarioError(f"{p}: no drill files (*.yaml) in this folder")
            out += found
        else:
            out.append(p)
    return out


def json_schema() -> dict[str, Any]:
    """The drill file's JSON Schema (for editors)."""
    schema = Drill.model_json_schema()
    schema["title"] = "mrc-testbed drill"
    return schema
