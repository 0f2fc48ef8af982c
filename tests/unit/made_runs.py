"""Results folders as a run writes them (RunResults, collect), from agents' iteration files:
for tests of the commands that read them."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from hostagent.protocol.qp import QPCounters
from runcontract import RunMeta
from testbed import scenario
from testbed.fabric.plan import make_plan
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
                qp_row(transport, (rank + 1) % 4)]}))
        table = collect(out, r.dir, [AgentOutcome(h, i, 0, {})
                                     for i, h in enumerate(sc.rank_hosts())], make_plan(sc),
                        transport).table
        r.write_text("summary.txt", table)
    r.finish(status, error, {})
    return r.dir


def qp_row(transport: str, peer: int) -> dict:
    """A QP's row of paths.json as the agent writes it (hostagent/runtime/agent.py)."""
    roce = transport == "rocev2"
    return {"peer": peer, "qpn": 1, "failed": None, "failed_at": None, "failed_timeouts": None,
            "retry_budget_s": None, "cwnd": 4096.0, "cc_decreases": 0,
            "cnps": 0 if roce else None, "plane": 0 if roce else None,
            "sport": 49152 if roce else None, **asdict(QPCounters(data_sent=2))}


def run_meta(**fields: object) -> RunMeta:
    """A meta.json record of a complete MRC run, with `fields` (plain JSON values) over it."""
    return RunMeta.model_validate({"run_id": "r", "scenario": "s", "transport": "mrc",
                                   "seed": 1, "status": "complete",
                                   "started": "2026-01-01T00:00:00Z", **fields})
