"""Results folders as a run writes them (RunResults, collect), from agents' iteration files:
for tests of the commands that read them."""
from __future__ import annotations

import json
from pathlib import Path

from testbed import scenario
from testbed.run.collect import collect
from testbed.run.results import RunResults
from testbed.run.traffic import AgentOutcome

TEXT = "name: o\nworkload: {size: 1KiB, iterations: 2, warmup: 0}\n"


def made_run(base: Path, transport: str = "mrc", status: str = "complete",
             workload: bool = True, text: str = TEXT, error: str | None = None) -> Path:
    """A run's folder of scenario `text`, ended with `status` and `error`; without `workload`,
    as --verify-only leaves it (no tables)."""
    sc = scenario.parse(text, "t")
    r = RunResults(base, sc, text, 1, transport)
    if workload:
        out = r.dir / "agents"
        for rank, host in enumerate(sc.rank_hosts()):
            (out / host).mkdir(parents=True)
            (out / host / "iterations.json").write_text(json.dumps([
                {"rank": rank, "kind": "all_reduce", "iteration": k, "warmup": False,
                 "start": 10.0 + k, "end": 10.5 + k, "bytes": 1024, "verified": True,
                 "error": None} for k in range(2)]))
            (out / host / "messages.json").write_text(json.dumps([
                {"iteration": k, "warmup": False, "peer": (rank + 1) % 4, "size": 256,
                 "start": 10.0 + k, "end": 10.4 + k, "retransmits": 0, "trims": 0,
                 "evs_used": [0]} for k in range(2)]))
            (out / host / "paths.json").write_text(json.dumps({"qps": [
                {"qpn": 1, "peer": (rank + 1) % 4, "data_sent": 2, "retransmits": 0}]}))
        table, _ = collect(out, r.dir, [AgentOutcome(h, i, 0, {})
                                        for i, h in enumerate(sc.rank_hosts())], sc, transport)
        r.write_text("summary.txt", table)
    r.finish(status, error, {})
    return r.dir
