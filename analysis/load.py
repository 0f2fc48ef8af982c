"""Loading one run's results folder (the results contract) into pandas, and checking it.

A report must never quietly draw a half-written run as if it were whole: a folder that lacks
what every report needs raises `RunError` with one message saying which run and what is
missing; a run whose status is not `complete` but whose tables exist loads, and carries its
status so that the report says so on top.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from runcontract import (
    OPTIONAL_TABLES,
    REQUIRED_TABLES,
    SCENARIO,
    MetaError,
    RunFacts,
    RunMeta,
    UserError,
    read_meta,
    table_file,
)
from runcontract.table_io import TableError, read_table


class RunError(UserError):
    """A folder that is not a readable, reportable run: missing, not a run, or incomplete."""

    exit_code = 2


@dataclass
class Run:
    """One run of one transport, as the contract stores it. Times in the tables stay wall clock
    (s since the epoch); `t0`, the workload's start, turns them into seconds since it."""

    dir: Path
    meta: RunMeta
    facts: RunFacts  # what the scenario said that a report needs, as the run recorded it
    tables: dict[str, pd.DataFrame] = field(repr=False)
    # the scenario as the run ran it (its folder's scenario.yaml): what no table records,
    # such as the stragglers its agents applied
    scenario: dict = field(default_factory=dict, repr=False)

    @property
    def transport(self) -> str:
        transport = self.meta.transport
        assert transport is not None  # load_run refuses a fabric-only run
        return transport

    @property
    def status(self) -> str:
        return self.meta.status

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def t0(self) -> float:
        """The workload's start, which faults' `at` counts from: the common start time the
        runner gave the agents (meta.json), or in older runs the first rank's first start
        (a few ms later)."""
        start = self.meta.workload_start
        return (start if start is not None else
                float(self.tables["iterations"]["start"].min()))

    @property
    def t_end(self) -> float:
        return float(self.tables["iterations"]["end"].max())

    @property
    def world(self) -> int:
        return int(self.tables["iterations"]["rank"].nunique())

    def __getattr__(self, name: str) -> pd.DataFrame:
        """run.iterations, run.links, ...: the tables by name."""
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(name)


def fidelity_record(run: Run) -> dict[str, Any] | None:
    """The fidelity verdict with the numbers it judged on, as plain data (None: not judged)."""
    return None if run.meta.fidelity is None else run.meta.fidelity.model_dump()


def protocol_record(run: Run) -> dict[str, Any] | None:
    """The protocol build the agents ran, as plain data (None: not recorded)."""
    return None if run.meta.protocol is None else run.meta.protocol.model_dump()


def _incomplete(path: Path, meta: RunMeta, what: str) -> RunError:
    phase, error = meta.ended_in_phase, meta.error
    how = (f"status {meta.status}" + (f", ended in phase {phase}" if phase else "") +
           (f": {error}" if error else ""))
    return RunError(f"{path}: incomplete run ({how}): it has {what}, so nothing to report",
                    "rerun the scenario (`mrc-testbed run FILE`)")


def load_run(path: str | Path) -> Run:
    """Read a run folder; raise `RunError` if it is not one, or lacks a table every report
    needs."""
    path = Path(path)
    if not path.is_dir():
        raise RunError(f"{path}: no such run folder",
                       "give a folder made by `mrc-testbed run` (see `mrc-testbed list`)")
    try:
        meta = read_meta(path)
    except MetaError as exc:
        raise RunError(exc.message, exc.hint) from None
    if not meta.transport:
        raise RunError(f"{path}: a fabric-only run (--verify-only, --hold or --cli): it ran no "
                       f"workload, so there is nothing to report")
    facts = meta.facts
    if facts is None:
        raise RunError(f"{path}: meta.json has no facts of the scenario (a run made by an older "
                       f"testbed, or a damaged file)", "rerun the scenario")
    missing = [name for name in REQUIRED_TABLES if not (path / table_file(name)).exists()]
    if missing:
        raise _incomplete(path, meta, "no " + ", ".join(table_file(m) for m in missing))
    _check_scenario_file(path, meta)
    tables = {name: _read_table(path, name, meta.transport) for name in REQUIRED_TABLES}
    for name in OPTIONAL_TABLES:
        tables[name] = (_read_table(path, name, meta.transport)
                        if (path / table_file(name)).exists() else pd.DataFrame())
    tables["iterations"] = _whole_iterations(tables["iterations"])
    if tables["iterations"].empty:
        raise _incomplete(path, meta, "no iteration in iterations.parquet")
    return Run(path, meta, facts, tables, _scenario_data(path))


def _whole_iterations(iterations: pd.DataFrame) -> pd.DataFrame:
    """The iterations every rank completed. An agent that failed (its QP gave up, or it broke)
    marks the iterations it did not complete (error "not completed: ...", no times), and its
    peers may have completed one it did not: such an iteration's CCT would be too short, so the
    report, like the run's summary, is of the whole ones."""
    world = iterations["rank"].nunique()
    ran = iterations[iterations["start"].notna()]
    ranks = ran.groupby("iteration")["rank"].nunique()
    return ran[ran["iteration"].isin(ranks[ranks == world].index)]


def _read_table(path: Path, name: str, transport: str) -> pd.DataFrame:
    """A table checked against its schema, or one RunError naming the file and what is wrong
    with it (truncated, not parquet at all, a column missing or of another kind)."""
    try:
        return read_table(path, name, transport)
    except TableError as exc:
        raise RunError(f"{path / exc.table.file}: {exc.detail}", exc.hint) from None


def _check_scenario_file(path: Path, meta: RunMeta) -> None:
    """The scenario.yaml a report shows must be the one the tables came from."""
    expected = meta.scenario_sha256
    if expected is None:  # runs made before the digest was recorded
        return
    try:
        actual = hashlib.sha256((path / SCENARIO).read_bytes()).hexdigest()
    except OSError:
        actual = None
    if actual != expected:
        raise RunError(f"{path}: {SCENARIO} is not the file this run ran (its SHA-256 differs "
                       f"from meta.json's scenario_sha256, or it is gone)",
                       "restore the file, or rerun the scenario")


def _scenario_data(path: Path) -> dict:
    """The run's scenario.yaml as data; empty when it is missing or not a mapping."""
    try:
        data = yaml.safe_load((path / SCENARIO).read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Several runs, each checked; the first bad one raises, and so does a run named twice."""
    runs = [load_run(p) for p in paths]
    seen: dict[Path, Path] = {}
    for run in runs:
        real = run.dir.resolve()
        if real in seen:
            raise RunError(f"{run.dir}: the same run as {seen[real]}; a comparison needs "
                           f"different runs")
        seen[real] = run.dir
    return runs
