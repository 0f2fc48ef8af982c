"""Did this run measure the network or the CPU? The verdict and its thresholds, as pure logic.

An emulator's numbers hold only while the machine keeps up. The verdict rests on symptoms
measured on the run's own behalf, each against a bound that follows from the scenario:

- **links** (Mininet-HiFi's link invariant, CoNEXT 2012): on a backlogged port, the next
  dequeue comes one serialization time after the last (testbed/kernel/bpf/link_gap.c measures
  how much later against a virtual link at the port's rate). `LINK_FAITHFUL` of the backlogged
  dequeues within one full packet's time is faithful, below `LINK_DEGRADED` not:
  a port whose next packet waits twice its time on the wire one time in twenty runs at the
  CPU's pace, not the link's. Fewer than `MIN_GAPS` backlogged gaps (a light load never
  queues) do not judge the links.
- **agents** (timers firing late, the event-loop lag, inside the timed collectives): an agent
  refills its host port's queue at every wake-up, so a wake-up later than the queue lasts may
  leave the link idle while the host had data. The share of the timed time lost so (lateness
  beyond the queue's time, summed) bounds the throughput the host may have lost to the CPU:
  faithful up to `STALL_FAITHFUL` (below the run-to-run spread of quickstart's busbw, 87-92%
  of the ideal), not faithful over `STALL_DEGRADED` (10 points from the ideal).
  Separately, a 99th percentile lag beyond the base
  retransmission timeout is not faithful: timeouts then fire on CPU delay, not on loss, and
  condemn healthy paths (seen at 32+ hosts).
- **the run's CPU**: what the run itself used of the machine over the workload (from the
  agents' common start): its agents' time on a CPU (scheduler statistics), the runner's own
  process (every thread: telemetry sampler, fidelity monitor, fault injector; in the cluster
  mode each server's agent, and the runner where it shares the server's kernel), and the
  kernel's softirq time (where the fabric forwards). All three compete for the same cores.
  From `RUN_CPU_DEGRADED` of all cores on the run competes with itself (its own forwarding,
  its telemetry); from `RUN_CPU_NOT` it has no headroom at all and the agents' per-packet
  work, not the links, sets the pace (measured: 32 agents at 100 Mbit/s on 2 cores used 97%
  and reached 1% of the ideal, with every retransmission timeout spurious; quickstart used
  44-73% and reached 88-92%). Timer lateness alone misses this: an agent that is too slow is
  woken promptly and then spends its slice on per-packet work. On a kernel without
  CONFIG_IRQ_TIME_ACCOUNTING (this one) softirq work done in an agent's or the runner's
  context is in two terms, so the sum errs high; it is bounded by the machine's busy share
  over the same time, which holds every term once (measured on quickstart: a sum of 81% while
  the whole machine was 65% busy). On a machine others keep busy the bound is loose and the
  sum stands, erring towards caution.
- **telemetry**: a sampler interval over `TELEMETRY_STRETCH` x its period leaves holes in the
  time series: degraded (the network may still be right; its record is not whole).

CPU busy share, steal and pressure (PSI) are recorded and quoted, but are not criteria on their
own: on a shared machine a fully busy CPU may be others' work that the scheduler shares fairly
while this run's links and timers keep pace, and a run starved by it shows in the symptoms
above. In a virtual machine the others may be the host's other guests: from `STEAL_QUOTED` of
the traffic's time stolen, a verdict that is not faithful says that the hypervisor took the CPU
(measured on a shared host: 23% of a quickstart run's CPU time stolen while the run itself used
47% of the cores, its agents' timers late beyond their port's queue for 2-6% of the timed time).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FAITHFUL, DEGRADED, NOT_FAITHFUL = "faithful", "degraded", "not faithful"
VERDICTS = (FAITHFUL, DEGRADED, NOT_FAITHFUL)  # best to worst

LINK_FAITHFUL = 0.99  # share of backlogged gaps within one packet time
LINK_DEGRADED = 0.95
ONE_PACKET_PCT = 100  # lateness below this % of a full packet's time: within one packet time
MIN_GAPS = 200  # fewer backlogged gaps than this: the links were not loaded enough to judge
STALL_FAITHFUL = 0.02  # share of an agent's timed time its port may have idled for the CPU
STALL_DEGRADED = 0.10
RUN_CPU_DEGRADED = 0.8  # share of all cores the run itself used over the workload
RUN_CPU_NOT = 0.9
TELEMETRY_STRETCH = 4.0  # a sample interval this many periods long is a hole
STEAL_QUOTED = 0.05  # share of the traffic's time a hypervisor ran others: named in the reasons


@dataclass(frozen=True)
class LinkGaps:
    """The fabric's backlogged dequeues: `hist[i]` late by less than `edges_pct[i]` % of a full
    packet's time (and at least the edge before), the last bucket the rest; `unavailable` says
    why there is none."""

    edges_pct: tuple[float, ...] = ()
    hist: tuple[int, ...] = ()
    gap_ns: int = 0  # sum of the backlogged gaps
    late_ns: int = 0  # sum of their excess over one serialization time
    unavailable: str | None = None

    @property
    def measured(self) -> int:
        return sum(self.hist)

    def share_within(self, pct: float) -> float:
        """Share of measured dequeues late by less than `pct` (an edge of the histogram)."""
        if pct not in self.edges_pct:
            raise ValueError(f"{pct}% is not an edge of the histogram {self.edges_pct}")
        below = sum(self.hist[: self.edges_pct.index(pct) + 1])
        return below / self.measured if self.measured else 1.0


@dataclass(frozen=True)
class AgentLag:
    """One agent's event-loop lag inside its timed iterations (seconds a timer fired late),
    and how much of that time its port may have idled for it (`stalled` s of `timed` s)."""

    host: str
    p99: float
    max: float
    samples: int
    stalled: float = 0.0
    timed: float = 0.0
    on_cpu: float | None = None  # s on a CPU over `span` s of workload (scheduler statistics)
    runq: float | None = None  # s runnable but waiting for a CPU
    span: float = 0.0

    @property
    def stalled_share(self) -> float:
        return self.stalled / self.timed if self.timed > 0 else 0.0



@dataclass(frozen=True)
class Bounds:
    """What the scenario allows: the host port's queue time and the ACK timeout (seconds)."""

    port_queue_s: float
    timeout_s: float
    telemetry_period_s: float


@dataclass(frozen=True)
class Observed:
    links: LinkGaps
    agents: Sequence[AgentLag]
    telemetry_max_interval_s: float | None  # the longest interval between two samples
    cpu_busy: float | None = None  # mean share of all cores busy over the traffic phase
    cpu_busy_max: float | None = None  # its highest sample
    psi_some: float | None = None  # share of the phase some task waited for a CPU
    cores: int | None = None
    softirq: float | None = None  # mean share of all cores in softirq (the fabric forwarding)
    runner: float | None = None  # share of all cores the run's own processes used (the runner)
    steal: float | None = None  # mean share of all cores a hypervisor gave other guests

    def run_cpu(self) -> tuple[float, float, float] | None:
        """(agents', runner's, kernel softirq) share of all cores over the workload; None when
        the agents gave no scheduler statistics."""
        timed = [a for a in self.agents if a.on_cpu is not None and a.span > 0]
        if not timed or not self.cores:
            return None
        span = sum(a.span for a in timed) / len(timed)
        agents = sum(a.on_cpu or 0.0 for a in timed) / (self.cores * span)
        return agents, self.runner or 0.0, self.softirq or 0.0

    def run_total(self, terms: float) -> float:
        """The run's share of all cores from the sum of its terms: at most what the whole
        machine was busy (the sum counts softirq in an agent's context twice)."""
        return terms if self.cpu_busy is None else min(terms, self.cpu_busy)


@dataclass
class Verdict:
    verdict: str
    reasons: list[str] = field(default_factory=list)
    numbers: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "reasons": self.reasons, **self.numbers}

    def line(self) -> str:
        """The terminal summary's line: loud when the numbers are the CPU's."""
        head = {FAITHFUL: "fidelity: faithful", DEGRADED: "fidelity: DEGRADED",
                NOT_FAITHFUL: "fidelity: NOT FAITHFUL (these numbers measure the CPU, not the "
                              "network)"}[self.verdict]
        return head + ("" if not self.reasons else " - " + "; ".join(self.reasons))


def lag_within(samples: Sequence[tuple[float, float]],
               windows: Sequence[tuple[float, float]]) -> list[float]:
    """The part of each timer's lateness that fell inside a timed window (an iteration's start
    to end): a sample that woke at `woke`, `late` s after it was due, stalled the loop over
    [woke - late, woke]. Samples that do not meet a window are left out; on-time ones inside
    count as 0. Windows must not overlap (one agent's iterations)."""
    out = []
    for woke, late in samples:
        due = woke - late
        for start, end in windows:
            if start <= woke <= end or (due < end and woke > start):
                out.append(max(0.0, min(woke, end) - max(due, start)))
                break
    return out


def agent_lag(host: str, samples: Sequence[tuple[float, float]],
              windows: Sequence[tuple[float, float]], port_queue_s: float,
              summary: dict | None = None) -> AgentLag | None:
    """One agent's lag inside its timed windows, with its CPU from `summary` (the agent's
    result.json `loop_lag`); None when no sample fell inside."""
    within = lag_within(samples, windows)
    if not within:
        return None
    stalled = sum(max(0.0, late - port_queue_s) for late in within)
    timed = sum(max(0.0, end - start) for start, end in windows)
    summary = summary or {}
    return AgentLag(host, quantile(within, 0.99), max(within), len(within), stalled, timed,
                    summary.get("on_cpu_s"), summary.get("runq_s"), summary.get("span_s", 0.0))


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by rank (no interpolation: a reported lag is one that happened)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _worse(a: str, b: str) -> str:
    return a if VERDICTS.index(a) >= VERDICTS.index(b) else b


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


@dataclass
class _Finding:
    """What one symptom says: its level, the reasons naming number and bound, its numbers."""

    verdict: str = FAITHFUL
    reasons: list[str] = field(default_factory=list)
    numbers: dict[str, Any] | None = None

    def worse(self, level: str, reason: str) -> None:
        self.verdict = _worse(self.verdict, level)
        self.reasons.append(reason)


def _links(links: LinkGaps) -> _Finding:
    """Mininet-HiFi's link invariant: backlogged ports dequeue within a packet's time."""
    found = _Finding(numbers={"backlogged_gaps": links.measured,
                              "unavailable": links.unavailable})
    assert found.numbers is not None
    if links.unavailable:
        found.reasons.append(f"link gaps not measured ({links.unavailable}): judged on the CPU "
                             f"side")
    elif links.measured >= MIN_GAPS:
        within = links.share_within(ONE_PACKET_PCT)
        idle = links.late_ns / links.gap_ns if links.gap_ns else 0.0
        found.numbers |= {"within_one_packet": round(within, 5),
                          "idle_while_backlogged": round(idle, 5)}
        if within < LINK_FAITHFUL:
            found.worse(DEGRADED if within >= LINK_DEGRADED else NOT_FAITHFUL,
                        f"links kept pace in {within:.2%} of {links.measured:,} backlogged "
                        f"gaps (< {LINK_FAITHFUL:.0%} within one packet time); idle "
                        f"{idle:.1%} of the time they had packets waiting")
    else:
        found.numbers["note"] = f"fewer than {MIN_GAPS} backlogged gaps: not judged"
    return found


def _agents(agents: Sequence[AgentLag], bounds: Bounds) -> _Finding:
    """The agents' timers: late beyond their port's queue time, or beyond the ACK timeout."""
    if not agents:
        return _Finding(reasons=["no agent reported its event-loop lag inside a timed "
                                 "iteration"])
    worst = max(agents, key=lambda a: a.stalled_share)
    slowest = max(agents, key=lambda a: a.p99)
    found = _Finding(numbers={"stalled_share": round(worst.stalled_share, 5),
                              "stalled_host": worst.host, "lag_p99_s": round(slowest.p99, 6),
                              "lag_p99_host": slowest.host,
                              "lag_max_s": round(max(a.max for a in agents), 6),
                              "agents": len(agents)})
    share = worst.stalled_share
    if share > STALL_FAITHFUL:
        found.worse(DEGRADED if share <= STALL_DEGRADED else NOT_FAITHFUL,
                    f"agents' timers late beyond their port's queue time "
                    f"({_ms(bounds.port_queue_s)}) for {share:.1%} of the timed collectives "
                    f"({worst.host}; over {STALL_FAITHFUL:.0%}): their ports may have idled "
                    f"for the CPU")
    if slowest.p99 > bounds.timeout_s:
        found.worse(NOT_FAITHFUL,
                    f"agent timers late by {_ms(slowest.p99)} at p99 ({slowest.host}), over "
                    f"the ACK timeout {_ms(bounds.timeout_s)}: timeouts fire on CPU delay, not "
                    f"on loss")
    return found


def _telemetry(gap: float | None, bounds: Bounds) -> _Finding:
    """The sampler kept its period (a starved one means the machine fell behind)."""
    found = _Finding(numbers={"max_interval_s": None if gap is None else round(gap, 3),
                              "period_s": bounds.telemetry_period_s})
    if gap is not None and gap > TELEMETRY_STRETCH * bounds.telemetry_period_s:
        found.worse(DEGRADED, f"telemetry starved: {gap:.2f} s between samples against a "
                              f"period of {bounds.telemetry_period_s:g} s")
    return found


def _cpu(obs: Observed) -> _Finding:
    """The run's own share of the cores: from RUN_CPU_NOT the agents set the pace."""
    found = _Finding(numbers={"busy_mean": obs.cpu_busy, "busy_max": obs.cpu_busy_max,
                              "psi_some": obs.psi_some, "cores": obs.cores,
                              "softirq": obs.softirq, "steal": obs.steal,
                              "run_runner": obs.runner})
    assert found.numbers is not None
    run = obs.run_cpu()
    if run is None:
        return found
    agents, runner, softirq = run
    terms = agents + runner + softirq
    total = obs.run_total(terms)
    found.numbers |= {"run_agents": round(agents, 4), "run_sum": round(terms, 4),
                      "run_total": round(total, 4)}
    if total >= RUN_CPU_DEGRADED:
        found.worse(DEGRADED if total < RUN_CPU_NOT else NOT_FAITHFUL,
                    f"the run itself used {total:.0%} of the {obs.cores} cores (agents "
                    f"{agents:.0%}, runner {runner:.0%}, kernel forwarding {softirq:.0%}; from "
                    f"{RUN_CPU_NOT:.0%} the agents' per-packet work sets the pace)")
    return found


def judge(obs: Observed, bounds: Bounds) -> Verdict:
    """The verdict, the worst of the symptoms', each reason naming the number and the bound it
    crossed; when not faithful, what the machine's CPU was doing besides."""
    numbers: dict[str, Any] = {"thresholds": {
        "link_within_one_packet": {"faithful": LINK_FAITHFUL, "degraded": LINK_DEGRADED},
        "min_backlogged_gaps": MIN_GAPS,
        "agent_stalled_share": {"faithful": STALL_FAITHFUL, "degraded": STALL_DEGRADED},
        "run_cpu_share": {"degraded": RUN_CPU_DEGRADED, "not_faithful": RUN_CPU_NOT},
        "agent_port_queue_s": bounds.port_queue_s, "agent_lag_p99_max_s": bounds.timeout_s,
        "telemetry_max_interval_s": TELEMETRY_STRETCH * bounds.telemetry_period_s}}
    verdict, reasons = FAITHFUL, []
    for name, found in (("links", _links(obs.links)), ("agents", _agents(obs.agents, bounds)),
                        ("telemetry", _telemetry(obs.telemetry_max_interval_s, bounds)),
                        ("cpu", _cpu(obs))):
        verdict = _worse(verdict, found.verdict)
        reasons += found.reasons
        numbers[name] = found.numbers
    if verdict != FAITHFUL and obs.cpu_busy is not None:
        psi = ("" if obs.psi_some is None else f", tasks waiting for a CPU {obs.psi_some:.0%}"
               f" of the time (PSI)")
        reasons.append(f"CPU {obs.cpu_busy:.0%} busy over the traffic{psi}")
    if verdict != FAITHFUL and obs.steal is not None and obs.steal >= STEAL_QUOTED:
        reasons.append(f"the hypervisor ran other guests for {obs.steal:.0%} of this machine's "
                       f"CPU time (steal): the host, not this run, took the CPU")
    return Verdict(verdict, reasons, numbers)


def combine(judged: Sequence[tuple[str, Verdict]]) -> Verdict:
    """The verdict of a run over several machines (cluster servers on their own kernels):
    the worst machine's, each reason naming its machine, every machine's numbers kept under
    `machines`. One machine: its verdict as it is."""
    if len(judged) == 1:
        return judged[0][1]
    worst = max(judged, key=lambda j: VERDICTS.index(j[1].verdict))[1]
    reasons = [f"{label}: {r}" for label, v in judged for r in v.reasons]
    return Verdict(worst.verdict, reasons,
                   {**worst.numbers, "machines": {label: v.to_json() for label, v in judged}})
