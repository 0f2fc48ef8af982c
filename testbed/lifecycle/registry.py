"""The registry of live runs: what each run created, written down before it is created.

One file per run under /run/mrc-testbed (tmpfs: gone at reboot, like the namespaces). The runner
appends a line per node as soon as its namespace exists, so even a run killed with SIGKILL
mid-build leaves an exact list of what to remove. `mrc-testbed clean` and the next run read it;
nothing that is not listed here is ever touched.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

STATE_DIR = Path(os.environ.get("MRC_TESTBED_STATE", "/run/mrc-testbed"))


def _start_time(pid: int) -> int | None:
    """Kernel start time of `pid` (field 22 of /proc/pid/stat): tells a pid from its reuse.
    None for a process that is gone or a zombie (dead, not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


@dataclass
class RunRecord:
    run_id: str
    runner_pid: int
    runner_start: int | None
    results: str
    scenario: str
    # name -> (shell pid, netns inode); inode None: spawned, namespace not seen yet
    nodes: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    # emulated servers (testbed/emulation/servers.py): named namespaces it made, and the
    # folder of their sshd keys and configs
    named_netns: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    path: Path | None = None

    def runner_alive(self) -> bool:
        return self.runner_start is not None and _start_time(self.runner_pid) == self.runner_start


class RunRegistry:
    """The current run's own record, appended to as the build goes."""

    def __init__(self, run_id: str, results: Path, scenario: str) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.path = STATE_DIR / f"{run_id}.jsonl"
        header = {"run_id": run_id, "runner_pid": os.getpid(),
                  "runner_start": _start_time(os.getpid()), "results": str(results),
                  "scenario": scenario}
        self._fh = open(self.path, "w")
        self._write(header)

    def _write(self, obj: dict) -> None:
        self._fh.write(json.dumps(obj) + "\n")
        self._fh.flush()

    def add_node(self, name: str, pid: int, inode: int | None) -> None:
        """Record a node; a later line for the same node completes an earlier one."""
        self._write({"node": name, "pid": pid, "netns": inode})

    def add_named_netns(self, name: str) -> None:
        """Record a named namespace (/run/netns/NAME) before `ip netns add` creates it."""
        self._write({"named_netns": name})

    def add_dir(self, path: Path) -> None:
        """Record a folder of the run's own under STATE_DIR before it is made."""
        self._write({"dir": str(path)})

    def close(self) -> None:
        """The run removed everything it created: forget it."""
        self._fh.close()
        self.path.unlink(missing_ok=True)


def read_all() -> list[RunRecord]:
    records = []
    for path in sorted(STATE_DIR.glob("*.jsonl")) if STATE_DIR.is_dir() else []:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not lines:
            path.unlink(missing_ok=True)
            continue
        head = lines[0]
        record = RunRecord(head["run_id"], head["runner_pid"], head.get("runner_start"),
                           head["results"], head["scenario"], path=path)
        for line in lines[1:]:
            if "named_netns" in line:
                record.named_netns.append(line["named_netns"])
            elif "dir" in line:
                record.dirs.append(line["dir"])
            else:
                record.nodes[line["node"]] = (line["pid"], line["netns"])
        records.append(record)
    return records
