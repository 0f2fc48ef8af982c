"""QPs that exhausted their retries are the run's outcome: which, when, after how many
timeouts; the agents they explain are told from agents that failed for no such reason."""
from __future__ import annotations

import math

import pandas as pd

from analysis.metrics import failed_qps
from runcontract.meta import GaveUp
from testbed.run.gave_up import gave_up, unexplained
from testbed.run.traffic import AgentOutcome

HOSTS = ["h0", "h1", "h2", "h3"]
T0 = 1000.0
WHY = "PSN 41 unacknowledged after 13 timeouts in a row (13 sends, last on EV 0)"


def _qps() -> pd.DataFrame:
    return pd.DataFrame([
        {"host": "h2", "rank": 2, "peer": 3, "qpn": 5, "failed": WHY, "failed_at": T0 + 7.5,
         "failed_timeouts": 13, "retry_budget_s": 4.8},
        {"host": "h1", "rank": 1, "peer": 2, "qpn": 3, "failed": WHY, "failed_at": T0 + 4.125,
         "failed_timeouts": 13, "retry_budget_s": 4.8},
        {"host": "h0", "rank": 0, "peer": 1, "qpn": 1, "failed": None, "failed_at": None,
         "failed_timeouts": None, "retry_budget_s": None}])


def test_the_qps_that_gave_up_in_the_order_they_did():
    gave = gave_up(_qps(), HOSTS, T0)
    assert [(g.host, g.peer_host, g.qpn, g.after_s, g.timeouts) for g in gave] == [
        ("h1", "h2", 3, 4.125, 13), ("h2", "h3", 5, 7.5, 13)]
    assert gave[0].line() == ("QP h1 -> h2 (qpn 3) gave up at 4.12 s after 13 timeouts "
                              "(retry budget 4.80 s)")


def test_no_failure_column_or_no_start_time():
    assert gave_up(pd.DataFrame(), HOSTS, T0) == []
    assert [g.after_s for g in gave_up(_qps(), HOSTS, None)] == [None, None]
    old = _qps().drop(columns=["failed_at", "failed_timeouts", "retry_budget_s"])
    assert [(g.timeouts, math.isinf(g.retry_budget_s)) for g in gave_up(old, HOSTS, T0)] == [
        (0, True), (0, True)]


def _agent(host: str, error: str | None, **more: object) -> AgentOutcome:
    return AgentOutcome(host, HOSTS.index(host), 1, {"status": "failed", "error": error, **more})


def test_agents_a_qp_giving_up_explains_and_those_it_does_not():
    gave = [GaveUp(host="h1", rank=1, peer=2, peer_host="h2", qpn=3, after_s=4.1, timeouts=13,
                   retry_budget_s=4.8, reason=WHY)]
    gave_up_itself = _agent("h1", f"RuntimeError: QP 3 has failed: {WHY}")
    stopped = _agent("h3", "stopped by the runner", stopped_by_runner="h1 failed")
    waiting = _agent("h2", "TimeoutError: no data from rank 1 in 30 s")
    crashed = _agent("h0", "ZeroDivisionError: division by zero")
    assert unexplained([gave_up_itself, stopped, waiting, crashed], gave) == [crashed]
    assert unexplained([gave_up_itself, crashed], []) == [gave_up_itself, crashed]


def test_failed_qps_counts_the_reasons_not_the_rows():
    assert failed_qps(_qps()) == 2
    assert failed_qps(pd.DataFrame({"qpn": [1]})) == 0
