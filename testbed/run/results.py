"""The results folder of a run and its `meta.json`: what ran, on what, and how it ended.

`status` is written as `running` before anything is built and rewritten at every end:
`complete`, `failed` (with the error), `interrupted` (SIGINT/SIGTERM), or `crashed` (set by the
clean-up of a run whose runner died). A reader never has to guess whether a folder is whole.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from hostagent.nic import FRAME_OVERHEAD
from hostagent.wire import HEADER_SIZE
from runcontract import META, SCENARIO, BackgroundWindow, RunFacts
from testbed.lifecycle.files import write_json
from testbed.scenario import Scenario

DEFAULT_BASE = Path(os.environ.get("MRC_TESTBED_RESULTS", "results"))


def _versions() -> dict:
    out = {"python": platform.python_version(), "kernel": platform.release()}
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
    return RunFacts(
        scenario=scenario.name, description=scenario.description or "",
        collective=scenario.workload.collective, size=scenario.workload.size,
        transport=transport,
        link_rates={"host": f.host_link.rate, "fabric": f.fabric_link.rate},
        node_tiers=tiers, ideal_busbw=ideal, ideal_planes=planes,
        packet_bits=8 * (scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD),
        background=tuple(BackgroundWindow(b.pattern, b.protocol, b.plane, b.at,
                                          b.at + b.duration) for b in scenario.background))


class RunResults:
    def __init__(self, base: Path, scenario: Scenario, scenario_text: str, seed: int,
                 transport: str | None = None) -> None:
        scenario_name = scenario.name
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        base.mkdir(parents=True, exist_ok=True)
        label = f"{scenario_name}-{transport}" if transport else scenario_name
        for n in range(1000):
            name = f"{stamp}-{label}" + (f"-{n}" if n else "")
            try:
                (base / name).mkdir()
                break
            except FileExistsError:
                continue
        self.dir = base / name
        self.run_id = name
        (self.dir / SCENARIO).write_text(scenario_text)
        self.meta = {
            "run_id": name, "scenario": scenario_name, "transport": transport, "seed": seed,
            "status": "running",
            "started": datetime.now(timezone.utc).isoformat(), "ended": None,
            "command": sys.argv, "runner_pid": os.getpid(), "versions": _versions(),
            "features": {}, "phases": {}, "error": None,
            "facts": facts(scenario, transport).to_json() if transport else None,
        }
        self._t0 = time.monotonic()
        self.save()

    def save(self) -> None:
        write_json(self.dir / META, self.meta)

    def write_json(self, name: str, data: dict) -> Path:
        path = self.dir / name
        write_json(path, data)
        return path

    def finish(self, status: str, error: str | None, phases: dict[str, float]) -> None:
        self.meta.update(status=status, error=error, ended=datetime.now(timezone.utc).isoformat(),
                         phases={k: round(v, 3) for k, v in phases.items()},
                         duration_s=round(time.monotonic() - self._t0, 3))
        self.save()


def list_runs(base: Path) -> list[dict]:
    runs = []
    for meta_path in sorted(base.glob("*/meta.json")) if base.is_dir() else []:
        try:
            runs.append(json.loads(meta_path.read_text()) | {"dir": str(meta_path.parent)})
        except ValueError:
            runs.append({"dir": str(meta_path.parent), "status": "unreadable meta.json"})
    return runs
