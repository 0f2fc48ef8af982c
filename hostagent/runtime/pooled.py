"""One process serving many emulated hosts: `python -m hostagent.runtime.pooled MANIFEST.json`.

The manifest lists the hosts this process serves: each host's agent config (the same file the
per-host mode reads) and the path of its network namespace (/proc/<pid>/ns/net of the host's
Mininet shell), or null for the namespace the process was started in. Every host keeps what it
has in the per-host mode: its own agent state, its own sockets opened inside its own namespace
(hostagent/runtime/netns.py), its own QPs, its own folder with config, agent.log, result.json and
the rest. Only the event loop (and the interpreter) is shared, which is the point: on a machine
with few cores, tens of Python interpreters each waking per packet cost more CPU in scheduling
and cache misses than the packets themselves.

Exit status 0 only if every host's workload completed and verified.
"""
from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from hostagent.runtime import agent
from hostagent.runtime.config import AgentConfig


class _OnlyHost(logging.Filter):
    """Passes the records logged while `who`'s task runs (agent.WHO is per task), and names
    in each record the host that logged it."""

    def __init__(self, who: str) -> None:
        super().__init__()
        self.who = who

    def filter(self, record: logging.LogRecord) -> bool:
        # an attribute LogRecord does not declare: set as logging sets `extra=` fields
        who = record.__dict__["who"] = agent.WHO.get()
        return who == self.who


def load(manifest: Path) -> list[tuple[AgentConfig, str | None]]:
    data = json.loads(Path(manifest).read_text())
    return [(AgentConfig.load(Path(h["config"])), h.get("netns")) for h in data["hosts"]]


def host_log(cfg: AgentConfig) -> logging.Handler:
    """The host's own agent.log, holding only that host's lines."""
    handler = logging.FileHandler(Path(cfg.out_dir) / "agent.log", mode="a")
    handler.setFormatter(logging.Formatter("%(asctime)s %(who)s: %(message)s"))
    handler.addFilter(_OnlyHost(f"{cfg.host} rank {cfg.rank}"))
    return handler


async def serve(hosts: list[tuple[AgentConfig, str | None]]) -> list[dict[str, Any]]:
    """Every host's result. Cancelled (SIGTERM from the runner), each host is stopped and still
    returns its result: a cancelled gather would raise instead, even after every host had
    written its result, and the process ended in a traceback rather than its summary line."""
    tasks = [asyncio.ensure_future(agent.host_main(cfg, ns)) for cfg, ns in hosts]
    try:
        await asyncio.wait(tasks)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
    return [task.result() for task in tasks]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m hostagent.runtime.pooled MANIFEST.json", file=sys.stderr)
        return 2
    hosts = load(Path(args[0]))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for cfg, _ in hosts:
        root.addHandler(host_log(cfg))
    shared = logging.StreamHandler(sys.stderr)  # what no host's task logged (the loop's own)
    shared.addFilter(_OnlyHost(""))
    shared.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    root.addHandler(shared)
    # SIGTERM (the runner ending the workload): every host stops, keeping what it completed
    results = asyncio.run(agent.stop_on_signal(serve(hosts)))
    bad = [r["host"] for r in results if r["status"] != "ok"]
    print(f"{len(hosts)} hosts served, {len(bad)} not ok{': ' + ', '.join(bad) if bad else ''}",
          file=sys.stderr)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
