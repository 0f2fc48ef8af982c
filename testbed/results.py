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


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


class RunResults:
    def __init__(self, base: Path, scenario_name: str, scenario_text: str, seed: int,
                 transport: str | None = None) -> None:
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
        (self.dir / "scenario.yaml").write_text(scenario_text)
        self.meta = {
            "run_id": name, "scenario": scenario_name, "transport": transport, "seed": seed,
            "status": "running",
            "started": datetime.now(timezone.utc).isoformat(), "ended": None,
            "command": sys.argv, "runner_pid": os.getpid(), "versions": _versions(),
            "features": {}, "phases": {}, "error": None,
        }
        self._t0 = time.monotonic()
        self.save()

    def save(self) -> None:
        _write_json(self.dir / "meta.json", self.meta)

    def write_json(self, name: str, data: dict) -> Path:
        path = self.dir / name
        _write_json(path, data)
        return path

    def finish(self, status: str, error: str | None, phases: dict[str, float]) -> None:
        self.meta.update(status=status, error=error, ended=datetime.now(timezone.utc).isoformat(),
                         phases={k: round(v, 3) for k, v in phases.items()},
                         duration_s=round(time.monotonic() - self._t0, 3))
        self.save()


def mark_ended_elsewhere(run_dir: Path, status_text: str) -> None:
    """For a run whose runner died: record that it did not finish, if nothing else did."""
    meta_path = run_dir / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return
    if meta.get("status") == "running":
        meta.update(status="crashed", error=status_text,
                    ended=datetime.now(timezone.utc).isoformat())
        _write_json(meta_path, meta)


def list_runs(base: Path) -> list[dict]:
    runs = []
    for meta_path in sorted(base.glob("*/meta.json")) if base.is_dir() else []:
        try:
            runs.append(json.loads(meta_path.read_text()) | {"dir": str(meta_path.parent)})
        except ValueError:
            runs.append({"dir": str(meta_path.parent), "status": "unreadable meta.json"})
    return runs
