"""Turning what the agents wrote into the run's tables (the results contract) and its summary.

Writes `iterations.parquet`, `messages.parquet`, `paths.parquet` (every EV of every QP: its
counters and final state) and `ev_states.parquet` (every EV state change with its time), and
returns the nccl-tests-style table the run prints.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from hostagent import nccl
from hostagent.workload import IterationRecord

from .traffic import AgentOutcome


def _read(out: Path, host: str, name: str):
    path = out / host / name
    return json.loads(path.read_text()) if path.exists() else []


def collect(out: Path, results_dir: Path, outcomes: list[AgentOutcome], transport: str,
            world: int) -> tuple[str, pd.DataFrame]:
    """Write the tables; return the summary table text and the iterations frame."""
    iterations, messages, evs, transitions, qps = [], [], [], [], []
    for o in outcomes:
        common = {"host": o.host, "rank": o.rank, "transport": transport}
        iterations += [{**common, **r} for r in _read(out, o.host, "iterations.json")]
        messages += [{**common, **m} for m in _read(out, o.host, "messages.json")]
        report = _read(out, o.host, "paths.json") or {}
        evs += [{**common, **e} for e in report.get("evs", [])]
        transitions += [{**common, **t} for t in report.get("transitions", [])]
        qps += [{**common, **q} for q in report.get("qps", [])]
    frames = {
        "iterations": pd.DataFrame(iterations, columns=[
            "host", "rank", "transport", "kind", "iteration", "warmup", "start", "end", "bytes",
            "verified", "error"]),
        "messages": pd.DataFrame(messages),
        "paths": pd.DataFrame(evs),
        "ev_states": pd.DataFrame(transitions),
        "qps": pd.DataFrame(qps),
    }
    if not frames["messages"].empty:
        frames["messages"]["evs_used"] = frames["messages"]["evs_used"].apply(list)
    for name, frame in frames.items():
        frame.to_parquet(results_dir / f"{name}.parquet", index=False)
    records = [IterationRecord(**{k: r[k] for k in IterationRecord.__dataclass_fields__})
               for r in iterations]
    table = nccl.format_table(nccl.summarize(records, world), transport=transport, world=world)
    return table, frames["iterations"]
