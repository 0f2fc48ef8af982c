"""The fidelity verdict from hand-computed inputs: each criterion's bounds, and the worst wins."""
from __future__ import annotations

import pytest

from testbed.run import verdict as fidelity
from testbed.run.verdict import (
    DEGRADED,
    FAITHFUL,
    NOT_FAITHFUL,
    AgentLag,
    Bounds,
    LinkGaps,
    Observed,
    judge,
)

EDGES = (1, 10, 100, 1000)  # buckets: <1%, <10%, <100%, <1000%, rest
BOUNDS = Bounds(port_queue_s=0.004, timeout_s=0.02, telemetry_period_s=0.25)
QUIET = AgentLag("h0", p99=0.001, max=0.002, samples=100, stalled=0.0, timed=1.0,
                 on_cpu=0.1, runq=0.0, span=1.0)


def links(on_time: int, late: int) -> LinkGaps:
    """`on_time` gaps within 1%, `late` ones between 100% and 1000% of a packet time."""
    return LinkGaps(EDGES, (on_time, 0, 0, late, 0), gap_ns=10**9, late_ns=10**7)


def observe(**kw) -> Observed:
    base = {"links": links(1000, 0), "agents": [QUIET], "telemetry_max_interval_s": 0.25,
            "cpu_busy": 0.5, "cores": 2, "softirq": 0.05}
    return Observed(**(base | kw))


def test_a_quiet_run_is_faithful_with_its_numbers():
    v = judge(observe(), BOUNDS)
    assert v.verdict == FAITHFUL and v.reasons == []
    out = v.to_json()
    assert out["verdict"] == "faithful" and out["links"]["within_one_packet"] == 1.0
    # the run's CPU: agents 0.1 s on a CPU over 1 s on 2 cores = 5%, plus 5% softirq
    assert out["cpu"]["run_agents"] == 0.05 and out["cpu"]["run_total"] == 0.1
    assert v.line() == "fidelity: faithful"


@pytest.mark.parametrize(("late", "verdict"), [
    (10, FAITHFUL),  # 990 / 1000 = 99.0% within one packet time: on the bound
    (11, DEGRADED),  # 98.9%
    (50, DEGRADED),  # 95.0%: on the lower bound
    (51, NOT_FAITHFUL),  # 94.9%
])
def test_links_within_one_packet_time(late: int, verdict: str):
    v = judge(observe(links=links(1000 - late, late)), BOUNDS)
    assert v.verdict == verdict
    assert v.numbers["links"]["within_one_packet"] == pytest.approx((1000 - late) / 1000)
    if verdict != FAITHFUL:
        assert "links kept pace in" in v.reasons[0] and "of 1,000 backlogged gaps" in v.reasons[0]


def test_too_few_backlogged_gaps_do_not_judge_the_links():
    v = judge(observe(links=links(100, 99)), BOUNDS)  # 199 < MIN_GAPS, half of them late
    assert v.verdict == FAITHFUL and "not judged" in v.numbers["links"]["note"]


def test_a_kernel_without_the_tracepoint_says_so():
    v = judge(observe(links=LinkGaps(unavailable="no qdisc:qdisc_dequeue")), BOUNDS)
    assert v.verdict == FAITHFUL
    assert v.reasons == ["link gaps not measured (no qdisc:qdisc_dequeue): judged on the CPU side"]


@pytest.mark.parametrize(("stalled", "verdict"), [
    (0.02, FAITHFUL),  # 2% of the timed second beyond the port's queue time: on the bound
    (0.021, DEGRADED),
    (0.10, DEGRADED),
    (0.101, NOT_FAITHFUL),
])
def test_agents_stalled_beyond_their_port_queue(stalled: float, verdict: str):
    agent = AgentLag("h7", p99=0.003, max=0.01, samples=100, stalled=stalled, timed=1.0)
    v = judge(observe(agents=[QUIET, agent]), BOUNDS)
    assert v.verdict == verdict
    assert v.numbers["agents"]["stalled_host"] == "h7"
    if verdict != FAITHFUL:
        assert f"for {stalled:.1%} of the timed collectives (h7" in v.reasons[0]


def test_timers_late_beyond_the_rto_are_not_faithful():
    agent = AgentLag("h3", p99=0.021, max=0.03, samples=100)  # RTO is 20 ms
    v = judge(observe(agents=[agent]), BOUNDS)
    assert v.verdict == NOT_FAITHFUL and "over the ACK timeout 20 ms" in v.reasons[0]
    assert judge(observe(agents=[AgentLag("h3", 0.02, 0.03, 100)]), BOUNDS).verdict == FAITHFUL


@pytest.mark.parametrize(("on_cpu", "verdict"), [
    (1.4, FAITHFUL),  # 4 agents x 1.4 s over 4 s on 2 cores = 70%, + 5% softirq = 75%
    (1.5, DEGRADED),  # 75% + 5% = 80%
    (1.7, NOT_FAITHFUL),  # 85% + 5% = 90%
])
def test_the_runs_own_cpu(on_cpu: float, verdict: str):
    agents = [AgentLag(f"h{i}", 0.001, 0.002, 100, on_cpu=on_cpu, runq=2.0, span=4.0)
              for i in range(4)]
    v = judge(observe(agents=agents, cpu_busy=1.0), BOUNDS)
    assert v.verdict == verdict
    assert v.numbers["cpu"]["run_agents"] == pytest.approx(on_cpu * 4 / 8)
    if verdict != FAITHFUL:
        assert any("the run itself used" in r for r in v.reasons)


@pytest.mark.parametrize(("runner", "verdict"), [
    (None, FAITHFUL),  # agents 70% + softirq 5%: the runner unmeasured counts nothing
    (0.04, FAITHFUL),  # 70% + 4% + 5% = 79%
    (0.05, DEGRADED),  # 80%: the runner's own process tips it
    (0.15, NOT_FAITHFUL),  # 90%
])
def test_the_runners_own_process_counts_in_the_runs_cpu(runner: float | None, verdict: str):
    agents = [AgentLag(f"h{i}", 0.001, 0.002, 100, on_cpu=1.4, runq=0.0, span=4.0)
              for i in range(4)]
    v = judge(observe(agents=agents, runner=runner, cpu_busy=1.0), BOUNDS)
    assert v.verdict == verdict
    cpu = v.numbers["cpu"]
    assert cpu["run_runner"] == runner
    assert cpu["run_total"] == cpu["run_sum"] == pytest.approx(0.7 + (runner or 0.0) + 0.05)
    if verdict != FAITHFUL:
        assert f"(agents 70%, runner {runner:.0%}, kernel forwarding 5%;" in v.reasons[0]


@pytest.mark.parametrize(("busy", "total", "verdict"), [
    (0.65, 0.65, FAITHFUL),  # quickstart measured: terms summing to 81%, the machine 65% busy
    (0.85, 0.81, DEGRADED),  # others' work made the machine busier: the sum stands
    (None, 0.81, DEGRADED),  # no machine share: the sum
])
def test_the_runs_cpu_is_at_most_the_machines_busy_share(busy, total: float, verdict: str):
    # agents 62% + runner 9% + softirq 10% = 81%: softirq in the agents' context counts twice
    agents = [AgentLag(f"h{i}", 0.001, 0.002, 100, on_cpu=1.24, span=4.0) for i in range(4)]
    v = judge(observe(agents=agents, runner=0.09, softirq=0.10, cpu_busy=busy), BOUNDS)
    assert v.verdict == verdict
    assert v.numbers["cpu"]["run_sum"] == pytest.approx(0.81)
    assert v.numbers["cpu"]["run_total"] == pytest.approx(total)


def test_a_busy_machine_alone_is_not_a_verdict_but_is_quoted():
    v = judge(observe(cpu_busy=1.0, psi_some=0.9), BOUNDS)
    assert v.verdict == FAITHFUL and v.reasons == []
    late = judge(observe(cpu_busy=1.0, psi_some=0.9, links=links(900, 100)), BOUNDS)
    assert late.verdict == NOT_FAITHFUL
    assert late.reasons[-1] == ("CPU 100% busy over the traffic, tasks waiting for a CPU 90% of "
                                "the time (PSI)")
    assert late.line().startswith("fidelity: NOT FAITHFUL (these numbers measure the CPU")


def test_a_hypervisors_steal_is_named_when_the_run_is_not_faithful():
    assert judge(observe(steal=0.3), BOUNDS).reasons == []  # faithful: nothing to explain
    late = AgentLag("h1", p99=0.001, max=0.002, samples=10, stalled=0.05, timed=1.0)
    v = judge(observe(agents=[late], steal=0.23), BOUNDS)
    assert v.verdict == DEGRADED and v.numbers["cpu"]["steal"] == 0.23
    assert v.reasons[-1] == ("the hypervisor ran other guests for 23% of this machine's CPU "
                             "time (steal): the host, not this run, took the CPU")
    # below 5% of the time stolen it is no explanation; unmeasured, nothing is said
    for steal in (0.049, None):
        assert not any("steal" in r for r in judge(observe(agents=[late], steal=steal),
                                                    BOUNDS).reasons)


def test_starved_telemetry_degrades():
    assert judge(observe(telemetry_max_interval_s=1.0), BOUNDS).verdict == FAITHFUL  # 4 periods
    v = judge(observe(telemetry_max_interval_s=1.01), BOUNDS)
    assert v.verdict == DEGRADED and "telemetry starved" in v.reasons[0]


def test_the_worst_criterion_wins():
    agent = AgentLag("h1", p99=0.001, max=0.002, samples=10, stalled=0.05, timed=1.0)
    v = judge(observe(agents=[agent], links=links(900, 100),
                      telemetry_max_interval_s=5.0), BOUNDS)
    assert v.verdict == NOT_FAITHFUL and len(v.reasons) == 4  # links, agents, telemetry, CPU


def test_no_agent_lag_is_said():
    v = judge(observe(agents=[]), BOUNDS)
    assert "no agent reported its event-loop lag" in v.reasons[0]


def test_lag_inside_timed_windows_only():
    windows = [(10.0, 11.0), (12.0, 13.0)]
    samples = [
        (10.5, 0.0),  # on time inside: 0
        (10.6, 0.05),  # stalled 10.55..10.6 inside: 0.05
        (11.5, 0.3),  # 11.2..11.5: between iterations, left out
        (12.1, 0.2),  # 11.9..12.1: the 0.1 inside the second window counts
        (14.0, 0.001),  # after the last window
    ]
    assert fidelity.lag_within(samples, windows) == pytest.approx([0.0, 0.05, 0.1])
    lag = fidelity.agent_lag("h0", samples, windows, port_queue_s=0.04,
                             summary={"on_cpu_s": 0.5, "runq_s": 0.1, "span_s": 3.0})
    assert lag is not None and lag.samples == 3 and lag.max == pytest.approx(0.1)
    # lateness beyond 40 ms: 10 ms + 60 ms, over 2 s timed
    assert lag.stalled == pytest.approx(0.07) and lag.stalled_share == pytest.approx(0.035)
    assert lag.on_cpu == 0.5 and lag.span == 3.0
    assert fidelity.agent_lag("h0", [(14.0, 0.0)], windows, 0.04) is None


def test_quantile_is_a_value_that_happened():
    assert fidelity.quantile([0.3, 0.1, 0.2], 0.5) == 0.2
    assert fidelity.quantile(list(range(100)), 0.99) == 99
    assert fidelity.quantile([], 0.99) == 0.0


def test_several_machines_the_worst_wins_each_reason_naming_its_machine():
    a = fidelity.Verdict(FAITHFUL, [], {"links": {"backlogged_gaps": 10}})
    b = fidelity.Verdict(DEGRADED, ["links kept pace in 97%"], {"links": {"backlogged_gaps": 5}})
    c = fidelity.Verdict(FAITHFUL, ["no agent reported"], {})
    got = fidelity.combine([("a", a), ("b", b), ("c", c)])
    assert got.verdict == DEGRADED
    assert got.reasons == ["b: links kept pace in 97%", "c: no agent reported"]
    assert got.numbers["links"] == {"backlogged_gaps": 5}  # the worst machine's numbers
    assert set(got.numbers["machines"]) == {"a", "b", "c"}
    assert got.numbers["machines"]["a"]["verdict"] == FAITHFUL
    assert fidelity.combine([("only", b)]) is b  # one machine: as it is
