"""`meta.json`, the record of one run: what ran, on what, how it ended, and the numbers a
report needs that no table holds.

It is a versioned contract: the testbed writes it only through `RunMeta` (`write_meta` in
testbed/lifecycle/files.py), every reader reads it through `read_meta`, which upgrades the
versions it knows and refuses newer ones with a message, never a half-understood record.
`schema_version` counts changes a reader must know about; a folder written before the key
existed is version 1. `schemas/meta.schema.json` is this model's JSON Schema (`make schemas`),
for notebooks and tools in other languages.
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from runcontract.errors import UserError
from runcontract.facts import RunFacts
from runcontract.record import Record
from runcontract.similarity import Similarity

SCHEMA_VERSION: Final = 5

Status = Literal["running", "complete", "failed", "interrupted", "crashed", "gave_up"]
Verdict = Literal["faithful", "degraded", "not faithful"]


class Telemetry(Record):
    """The sampler of the fabric's ports and the machine's CPU, and what it cost."""

    period_s: float
    samples: int
    queue_stats_every: int
    cpu_seconds: float
    cpu_share_of_one_core: float | None
    error: str | None


class Faults(Record):
    """The fault timeline as applied: its actions (table `events`), and why it stopped if it did."""

    actions: int
    error: str | None


class Background(Record):
    """The background flows: scheduled, started, ran to their end, and the first failures."""

    flows: int
    started: int
    ran: int
    failed: list[str]


class ProtocolBuild(Record):
    """The protocol build the agents ran: the one they all ran, or "mixed"; agents per build."""

    build: str
    agents: dict[str, int]


class Fidelity(BaseModel):
    """The fidelity monitor's verdict and reasons; the numbers it judged on (thresholds, links,
    agents, telemetry, cpu, machines) are kept as they were measured, beside them."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)

    def part(self, name: str) -> dict[str, Any]:
        """One group of the numbers judged on ("cpu", "agents", "links", ...); {} if absent."""
        value = (self.model_extra or {}).get(name)
        return value if isinstance(value, dict) else {}


class GaveUp(Record):
    """A QP that exhausted its retries: the transport giving up, as an RNIC moves its QP to the
    error state and the job aborts. A result of the run, not a fault of the testbed."""

    host: str
    rank: int
    peer: int  # the peer's rank
    peer_host: str
    qpn: int
    after_s: float | None  # s after the workload's start (None: the agent did not say when)
    timeouts: int  # consecutive timeouts of one packet when it gave up
    retry_budget_s: float  # the time from a packet's first send to giving up, timer unchanged
    reason: str

    def line(self) -> str:
        """'QP h1 -> h2 (qpn 3) gave up at 4.13 s after 13 timeouts (retry budget 4.80 s)'."""
        when = "" if self.after_s is None else f" at {self.after_s:.2f} s"
        return (f"QP {self.host} -> {self.peer_host} (qpn {self.qpn}) gave up{when} after "
                f"{self.timeouts} timeouts (retry budget {self.retry_budget_s:.2f} s)")


class JobRecord(Record):
    """One job of a run with several (scenario `jobs:`): where its ranks ran and, once its solo
    control ran in the same sitting, its time beside it. In a job's own folder (`jobs/<name>/`,
    `solo/<name>/`) it says which job the folder holds."""

    name: str
    hosts: list[str]
    placement: str  # "spread (4 hosts)", "hosts as listed"
    start_s: float  # after the run's common start, as the scenario states it
    transport: str
    solo: bool = False  # this folder is the job alone on the fabric (the control)
    time_s: float | None = None  # mean timed iteration or step, emulated s, beside the others
    solo_time_s: float | None = None  # the same alone, same fabric and seed
    solo_run: str | None = None  # the control's folder, relative to the run's
    solo_verdict: str | None = None  # the control's fidelity verdict
    gave_up: bool = False  # a QP of the job gave up beside the others (the job aborted)
    solo_gave_up: bool = False  # ... alone

    @property
    def slowdown(self) -> float | None:
        """The job's time beside the others over its time alone (1.0: no cost)."""
        if self.time_s is None or not self.solo_time_s:
            return None
        return self.time_s / self.solo_time_s


class RunMeta(Record):
    """One run's `meta.json`."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    scenario: str
    transport: str | None  # None: a fabric-only run (--verify-only, --hold, --cli)
    variant: str | None = None  # e.g. "RoCEv2, lossy, Go-Back-N, DCQCN"
    seed: int
    dcqcn: dict[str, JsonValue] | None = None  # RoCEv2's DCQCN settings as the scenario had them
    status: Status
    started: datetime
    ended: datetime | None = None
    scenario_sha256: str | None = None  # of scenario.yaml, as run
    command: list[str] = Field(default_factory=list)
    runner_pid: int | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    features: dict[str, JsonValue] = Field(default_factory=dict)  # the kernel's, as preflight found
    phases: dict[str, float] = Field(default_factory=dict)  # s each phase took
    error: str | None = None
    ended_in_phase: str | None = None
    duration_s: float | None = None
    facts: RunFacts | None = None  # what a report needs of the scenario (None: fabric-only)
    workload_start: float | None = None  # wall clock; what faults' `at` counts from
    faults: Faults | None = None
    protocol: ProtocolBuild | None = None
    background: Background | None = None
    telemetry: Telemetry | None = None
    fidelity: Fidelity | None = None
    gave_up: list[GaveUp] = Field(default_factory=list)  # QPs that exhausted their retries
    similarity: Similarity | None = None  # against the real fabric (None: fabric-only run)
    rate_auto: dict[str, Any] | None = None  # `rate: auto`: the rate, its arithmetic
    cluster: dict[str, Any] | None = None  # the servers under the fabric (cluster mode)
    job: JobRecord | None = None  # a job's folder: which job, of which run
    jobs: list[JobRecord] = Field(default_factory=list)  # a run of several: each, in jobs/

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def verdict(self) -> str | None:
        """The fidelity verdict; None: not judged (a run that ended before its collection)."""
        return None if self.fidelity is None else self.fidelity.verdict


class MetaError(UserError):
    """A meta.json that cannot be read as a run's record: `reason` says why, the message
    names the file too."""

    exit_code = 2

    def __init__(self, where: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"{where}: {reason}", hint)
        self.reason = reason


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 is version 2 without the key, and without `gave_up` (a QP that gave up then
    ended the run as `failed`)."""
    return {**data, "schema_version": 2}


def _from_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 is version 3 without `similarity` (unknown: None)."""
    return {**data, "schema_version": 3}


def _from_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 is version 4 without `facts.algorithm` and `facts.algorithm_modelled`: every
    collective ran its default algorithm (None)."""
    return {**data, "schema_version": 4}


def _from_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 4 is version 5 without `job` and `jobs`: every run ran one workload."""
    return {**data, "schema_version": 5}


_UPGRADES = {1: _from_v1, 2: _from_v2, 3: _from_v3, 4: _from_v4}


def parse_meta(data: object, where: str = "meta.json") -> RunMeta:
    """A record of any version this testbed knows, upgraded to the current one."""
    if not isinstance(data, dict):
        raise MetaError(where, f"holds a {type(data).__name__}, not a run's record",
                        "a damaged file: rerun the scenario")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise MetaError(where, f"schema_version {version!r} is not a version number",
                        "a damaged file: rerun the scenario")
    if version > SCHEMA_VERSION:
        raise MetaError(
            where, f"schema version {version}, newer than this testbed reads (up to "
            f"{SCHEMA_VERSION}); it was written by mrc-testbed "
            f"{(data.get('versions') or {}).get('mrc-testbed', '(unknown)')}",
            "upgrade mrc-testbed to read it, or report it with the version that wrote it")
    while version < SCHEMA_VERSION:
        data = _UPGRADES[version](data)
        version = data["schema_version"]
    try:
        return RunMeta.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(the record)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise MetaError(where, f"field {field}: {first['msg']}{more}",
                        "a damaged or hand-edited file: rerun the scenario") from None


def read_meta(run_dir: Path) -> RunMeta:
    """The run's meta.json; `MetaError` naming the file and the problem when it is missing,
    unreadable, newer than this testbed or not a run's record."""
    path = Path(run_dir) / "meta.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise MetaError(str(run_dir), "not a run folder (no meta.json)",
                        "give a folder made by `mrc-testbed run` (see `mrc-testbed list`)"
                        ) from None
    except ValueError as exc:
        raise MetaError(str(path), f"not JSON ({exc})", "a damaged file: rerun the scenario"
                        ) from None
    except OSError as exc:
        raise MetaError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    return parse_meta(data, str(path))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the current version (schemas/meta.schema.json)."""
    schema = RunMeta.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mrc-testbed run record (meta.json)"
    return schema
