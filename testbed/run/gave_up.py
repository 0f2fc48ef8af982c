"""A transport that gives up: QPs that exhausted their retries, as a result of the run.

An RNIC whose QP runs out of retries moves it to the error state and the job aborts: that is
what RoCEv2 does under a long enough outage, and what a comparison must show, not a crash of
the testbed. The agents report each QP's end in paths.json (qps.parquet); this module reads
which QPs gave up, and tells the agents that failed because of them from agents that failed for
a reason no transport explains (a bug: the run still fails).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from runcontract.meta import GaveUp
from testbed.run.traffic import AgentOutcome


def _number(value: object) -> float | None:
    """A table cell as a float; None for a missing one (None, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)  # type: ignore[arg-type]  # a cell of a numeric column


def gave_up(qps: pd.DataFrame, hosts: Sequence[str], t0: float | None) -> list[GaveUp]:
    """The QPs in `qps` (qps.parquet's rows) that gave up, in the order they did; `hosts` by
    rank, `t0` the workload's start (wall clock) their times count from."""
    if qps.empty or "failed" not in qps.columns:
        return []
    out = []
    for row in qps[qps["failed"].notna()].to_dict("records"):
        at = _number(row.get("failed_at"))
        budget = _number(row.get("retry_budget_s"))
        timeouts = _number(row.get("failed_timeouts"))
        out.append(GaveUp(
            host=str(row["host"]), rank=int(row["rank"]), peer=int(row["peer"]),
            peer_host=hosts[int(row["peer"])], qpn=int(row["qpn"]),
            after_s=None if at is None or t0 is None else round(at - t0, 4),
            timeouts=0 if timeouts is None else int(timeouts),
            retry_budget_s=math.inf if budget is None else budget, reason=str(row["failed"])))
    return sorted(out, key=lambda g: (g.after_s is None, g.after_s or 0.0, g.host, g.qpn))


def unexplained(failed: Sequence[AgentOutcome], gave: Sequence[GaveUp]) -> list[AgentOutcome]:
    """The failed agents that no QP giving up explains: an agent explains itself when one of its
    QPs gave up, and the others when it stopped them (they fail as an aborted job's ranks do,
    waiting on data that will never come, or stopped by the runner once a rank failed)."""
    if not gave:
        return list(failed)
    hosts = {g.host for g in gave}
    waiting = hosts | {g.peer_host for g in gave}
    return [o for o in failed if o.host not in hosts and "stopped_by_runner" not in o.result
            and not (o.host in waiting and _timed_out(o))]


def _timed_out(outcome: AgentOutcome) -> bool:
    """The agent ran out of time waiting (its own deadline), not a crash of its own."""
    return "TimeoutError" in str(outcome.result.get("error") or "")
