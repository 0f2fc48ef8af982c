"""The results folder of a run and its `meta.json`: what ran, on what, and how it ended.

`status` is written as `running` before anything is built and rewritten at every end:
`complete`, `gave_up` (a QP exhausted its retries), `failed` (with the error), `interrupted`
(SIGINT/SIGTERM), or `crashed` (set by the clean-up of a run whose runner died). A reader never
has to guess whether a folder is whole. The record is a `RunMeta` (runcontract/meta.py), the
one type every reader reads it through.
"""
from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from runcontract import META, SCENARIO, BackgroundWindow, RunFacts, RunMeta
from runcontract.meta import MetaError, Status, read_meta
from testbed.errors import EnvironmentProblem
from testbed.fabric.frame import Frame
from testbed.lifecycle.files import make_dir, write_json, write_meta, write_text
from testbed.run import algorithm
from testbed.run.similarity import similarity
from testbed.scenario import Scenario

DEFAULT_BASE = Path(os.environ.get("MRC_TESTBED_RESULTS", "results"))


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version(),
                                  "kernel": platform.release()}
    for dist in ("mrc-testbed", "pyroute2", "pydantic", "mininet"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    if out["mininet"] is None:
        try:
            import mininet.net
            out["mininet"] = getattr(mininet.net, "VERSION", None)
        except ImportError:
            pass
    return out


def facts(scenario: Scenario, transport: str) -> RunFacts:
    """What a report of this run needs to know of its scenario (the results contract)."""
    f, n = scenario.fabric, scenario.naming
    tiers = {n.host_name(i): "host" for i in range(f.host_count)}
    for p in range(f.planes):
        tiers |= {n.leaf_name(p, j): "leaf" for j in range(f.leaves_per_plane)}
        tiers |= {n.spine_name(p, s): "spine" for s in range(f.spines_per_plane)}
    ideal, planes = scenario.ideal_busbw(transport)
    chakra = scenario.workload.chakra
    chosen = algorithm.resolve(scenario)
    return RunFacts(
        scenario=scenario.name, description=scenario.description or "",
        collective=scenario.workload.collective, size=scenario.workload.size,
        transport=transport,
        link_rates={"host": f.host_link.rate, "fabric": f.fabric_link.rate},
        node_tiers=tiers, ideal_busbw=ideal, ideal_planes=planes,
        packet_bits=8 * (scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD),
        real_rate=f.real_rate, variant=scenario.variant(transport),
        ctrl_deps_dropped=None if chakra is None else chakra.ctrl_deps_dropped(
            scenario.rank_hosts()),
        algorithm=chosen.recorded, algorithm_modelled=chosen.modelled,
        background=tuple(BackgroundWindow(b.pattern, b.kind, b.plane, b.at,
                                          b.at + b.duration)  # emulated, as the run's events
                         for b in Frame.of(scenario).background(scenario.background)))


class RunResults:
    """A results folder: `<base>/<time>-<scenario>-<transport>`, or `<base>/<folder>` for a
    job's folder inside its run's (`jobs/<name>`, `solo/<name>`). A run of several jobs
    records no facts of its own: each job's folder has its job's."""

    def __init__(self, base: Path, scenario: Scenario, scenario_text: str, seed: int,
                 transport: str | None = None, folder: str | None = None) -> None:
        scenario_name = scenario.name
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        label = f"{scenario_name}-{transport}" if transport else scenario_name
        described = transport if not scenario.jobs else None
        try:
            base.mkdir(parents=True, exist_ok=True)
            name = _new_folder(base, folder or f"{stamp}-{label}")
            self.dir = base / name
            write_text(self.dir / SCENARIO, scenario_text)
        except OSError as exc:
            raise _unwritable(base, exc) from None
        self.run_id = name
        self.scenario_text = scenario_text
        self.parts: list[RunResults] = []  # its jobs' folders, which end as it ends
        self.meta = RunMeta(
            run_id=name, scenario=scenario_name, transport=transport,
            variant=scenario.variant(transport) if transport else None, seed=seed,
            dcqcn=scenario.dcqcn.model_dump() if transport == "rocev2" else None,
            status="running", started=datetime.now(timezone.utc),
            scenario_sha256=hashlib.sha256(scenario_text.encode()).hexdigest(),
            command=list(sys.argv), runner_pid=os.getpid(), versions=_versions(),
            facts=facts(scenario, described) if described else None,
            similarity=similarity(scenario) if described else None)
        self._t0 = time.monotonic()
        self.save()

    def save(self) -> None:
        try:
            write_meta(self.dir, self.meta)
        except OSError as exc:
            raise _unwritable(self.dir, exc) from None

    def write_json(self, name: str, data: dict) -> Path:
        path = self.dir / name
        try:
            write_json(path, data)
        except OSError as exc:
            raise _unwritable(self.dir, exc) from None
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.dir / name
        try:
            write_text(path, text)
        except OSError as exc:
            raise _unwritable(self.dir, exc) from None
        return path

    def finish(self, status: Status, error: str | None, phases: dict[str, float]) -> None:
        for part in self.parts:  # a job none of whose QPs gave up completed
            part.meta.ended_in_phase = self.meta.ended_in_phase
            part.finish("complete" if status == "gave_up" and not part.meta.gave_up
                        else status, error, phases)
        m = self.meta
        m.status, m.error, m.ended = status, error, datetime.now(timezone.utc)
        m.phases = {k: round(v, 3) for k, v in phases.items()}
        m.duration_s = round(time.monotonic() - self._t0, 3)
        self.save()


def _new_folder(base: Path, stem: str) -> str:
    """Create `base/stem` (or stem-1, stem-2, ...) exclusively: never a folder that exists, nor
    one a symlink names. Its name."""
    for n in range(1000):
        name = stem + (f"-{n}" if n else "")
        try:
            make_dir(base / name)
            return name
        except FileExistsError:
            continue
    raise EnvironmentProblem(f"{base}: 1,000 folders named {stem}[-N] exist already",
                             "remove old results, or give --results another folder")


def _unwritable(where: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(f"cannot write the results in {where}: {exc.strerror or exc}",
                              "free some space, or give --results a writable folder")


def list_runs(base: Path) -> list[tuple[Path, RunMeta | MetaError]]:
    """Every run folder under `base`, oldest first, with its record or why it cannot be read."""
    runs: list[tuple[Path, RunMeta | MetaError]] = []
    for meta_path in sorted(base.glob("*/" + META)) if base.is_dir() else []:
        try:
            runs.append((meta_path.parent, read_meta(meta_path.parent)))
        except MetaError as exc:
            runs.append((meta_path.parent, exc))
    return runs
