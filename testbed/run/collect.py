"""Turning what the agents wrote into the run's tables (the results contract) and its summary.

Writes `iterations.parquet`, `messages.parquet`, `paths.parquet` (every EV of every MRC QP:
its plane and spine, counters and final state; every RoCEv2 QP: its plane, UDP source port
and the spine the fabric's hash gave it), `ev_load.parquet` (MRC, where sampled: each EV's
packets sent over time), `ev_states.parquet` (every EV state change with its time),
`qps.parquet`, `links.parquet` (every port's counters over time) and `events.parquet`
(every fault action: scheduled and applied time, lag), and returns the
nccl-tests-style table the run prints.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hostagent.runtime.ev_load import ev_load_records
from hostagent.workloads import nccl
from hostagent.workloads.iterations import IterationRecord
from runcontract.table_io import frame_of, write_table
from testbed.fabric import paths
from testbed.fabric.frame import Frame
from testbed.fabric.plan import FabricPlan
from testbed.run.flow_summary import flow_lines
from testbed.run.ideal import ideal_iteration
from testbed.run.traffic import AgentOutcome
from testbed.scenario import Scenario
from testbed.scenario.units import format_rate, format_time


def _read(out: Path, host: str, name: str) -> Any:
    path = out / host / name
    return json.loads(path.read_text()) if path.exists() else []


def _spines(plan: FabricPlan) -> dict[tuple[str, int, int], float]:
    """(host, peer rank, EV index) -> the spine the EV crosses (NaN: same leaf, no spine)."""
    hosts = plan.scenario.rank_hosts()
    return {(h, r, i): (float("nan") if ev.spine is None else ev.spine)
            for h in hosts for r, peer in enumerate(hosts) if peer != h
            for i, ev in enumerate(paths.entropy_values(plan, h, peer,
                                                        plan.scenario.mrc.evs_per_path))}


def iteration_gaps(records: list[IterationRecord]) -> list[float]:
    """Seconds between one iteration's end and the next one's start on each rank: making and
    checking buffers (and the compute gap), which the timed collective leaves out."""
    by_rank: dict[int, list[IterationRecord]] = {}
    for r in records:
        by_rank.setdefault(r.rank, []).append(r)
    gaps = []
    for mine in by_rank.values():
        mine.sort(key=lambda r: r.iteration)
        gaps += [b.start - a.end for a, b in zip(mine, mine[1:]) if b.iteration == a.iteration + 1]
    return gaps


def _gap_line(records: list[IterationRecord]) -> str:
    gaps = sorted(iteration_gaps(records))
    if not gaps:
        return ""
    return (f"# Gap between iterations: median {gaps[len(gaps) // 2] * 1e3:.1f} ms, max "
            f"{gaps[-1] * 1e3:.1f} ms (buffers made and checked; not timed)\n")


def step_table(records: list[IterationRecord], world: int, transport: str,
               what: str = "training step") -> str:
    """One line per timed step (`what` runs it: a training step, a trace, flows): its time
    (over the ranks, from its first start or the previous step's last end, when later, to its
    last end: nccl.iteration_begins) and how many ranks verified every node of it."""
    by_iteration: dict[int, list[IterationRecord]] = {}
    for r in records:
        by_iteration.setdefault(r.iteration, []).append(r)
    spans = {it: (min(r.start for r in group), max(r.end for r in group))
             for it, group in by_iteration.items()}
    begins = nccl.iteration_begins(spans)
    lines = [f"# {what} over {transport}, {world} ranks",
             "#  iteration   time (ms)   ranks verified"]
    for it, group in sorted(by_iteration.items()):
        if group[0].warmup:
            continue
        span = spans[it][1] - begins[it]
        lines.append(f"{it:11d} {span * 1e3:11.1f}   {sum(r.verified for r in group)}/{world}")
    wrong = sum(not r.verified for r in records)
    lines.append(f"# Wrong results        : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
    return "\n".join(lines) + "\n"


@dataclass
class _Rows:
    """What the agents wrote, one list of rows per table, each row tagged with its agent."""

    iterations: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)  # iterations not completed
    messages: list[dict[str, Any]] = field(default_factory=list)
    evs: list[dict[str, Any]] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    qps: list[dict[str, Any]] = field(default_factory=list)
    ev_load: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Collected:
    """The summary as the terminal prints it, and the tables the runner reads on."""

    table: str
    iterations: pd.DataFrame
    qps: pd.DataFrame


def _gather(out: Path, outcomes: list[AgentOutcome], scenario: Scenario,
            transport: str, job: str | None) -> _Rows:
    """Every agent's files; an agent that failed has its missing iterations marked."""
    rows = _Rows()
    w = scenario.workload
    for o in outcomes:
        common = {"host": o.host, "rank": o.rank, "transport": transport, "job": job}
        done = [{**common, **r} for r in _read(out, o.host, "iterations.json")]
        rows.iterations += done
        if o.result.get("status") != "ok":
            have = {r["iteration"] for r in done}
            rows.missing += [{**common, "kind": w.collective, "iteration": i,
                              "warmup": i < w.warmup, "start": None, "end": None,
                              "bytes": w.size, "verified": False,
                              "error": f"not completed: {o.result.get('error') or 'agent failed'}"}
                             for i in range(w.warmup + w.iterations) if i not in have]
        rows.messages += [{**common, **m} for m in _read(out, o.host, "messages.json")]
        report = _read(out, o.host, "paths.json") or {}
        rows.evs += [{**common, **e} for e in report.get("evs", [])]
        rows.transitions += [{**common, **t} for t in report.get("transitions", [])]
        rows.qps += [{**common, **q} for q in report.get("qps", [])]
        sampled = _read(out, o.host, "ev_load.json")
        rows.ev_load += [{**common, **r} for r in (ev_load_records(sampled) if sampled else [])]
        rows.steps += [{**common, **r} for r in _read(out, o.host, "steps.json")]
    return rows


def _frames(rows: _Rows, plan: FabricPlan, transport: str,
            link_rows: list[dict[str, Any]] | None,
            event_rows: list[dict[str, Any]] | None) -> dict[str, pd.DataFrame]:
    """The tables, each EV's spine added from the plan."""
    run = (transport,)
    if transport == "rocev2":  # the runner probed the spines of the QPs that sent data
        rows.qps = [{**q, "spine": q.get("spine")} for q in rows.qps]
    frames = {
        "iterations": frame_of("iterations", rows.iterations + rows.missing, run),
        "messages": frame_of("messages", rows.messages, run),
        "paths": frame_of("paths", rows.evs, run),
        "ev_states": frame_of("ev_states", rows.transitions, run),
        "qps": frame_of("qps", rows.qps, run),
    }
    spines = _spines(plan)
    for name, table in (("paths", rows.evs), ("ev_load", rows.ev_load)):
        if table:
            frame = pd.DataFrame(table)
            frame["spine"] = [spines[(h, p, e)] for h, p, e in
                              zip(frame["host"], frame["peer"], frame["ev"], strict=True)]
            frames[name] = frame
    if transport == "rocev2" and rows.qps:
        # one path per QP: its plane (the agent's) and spine (the leaf's FIB, traffic.py)
        frames["paths"] = pd.DataFrame([
            {"host": q["host"], "rank": q["rank"], "transport": transport, "job": q["job"],
             "peer": q["peer"],
             "qpn": q["qpn"], "ev": 0, "plane": q.get("plane"),
             "spine": float("nan") if q.get("spine") is None else q["spine"],
             "sport": q.get("sport"), "sent": q["data_sent"], "state": "GOOD"}
            for q in rows.qps])
    if plan.scenario.workload.steps:
        frames["steps"] = frame_of("steps", rows.steps, run)
    if link_rows is not None:
        frames["links"] = frame_of("links", link_rows, run)
    if event_rows is not None:
        events = frame_of("events", event_rows, run)
        events["params"] = events["params"].apply(lambda p: json.dumps(p, default=str))
        frames["events"] = events
    if not frames["messages"].empty:
        frames["messages"]["evs_used"] = frames["messages"]["evs_used"].apply(list)
    return frames


def collect(out: Path, results_dir: Path, outcomes: list[AgentOutcome], plan: FabricPlan,
            transport: str, link_rows: list[dict[str, Any]] | None = None,
            event_rows: list[dict[str, Any]] | None = None, job: str | None = None) -> Collected:
    """Write the tables (links.parquet from the telemetry sampler's rows, when given), each
    checked against its schema (`TableError`: what the agents or the sampler wrote does not
    match it, a bug), every agent's rows naming `job` (a run of several jobs); return the
    summary table text and the tables the runner reads on."""
    scenario = plan.scenario
    rows = _gather(out, outcomes, scenario, transport, job)
    frames = _frames(rows, plan, transport, link_rows, event_rows)
    for name, frame in frames.items():
        write_table(results_dir, name, frame, (transport,))
    records = IterationRecord.of_rows(rows.iterations)
    flows = scenario.workload.flows
    table = (step_table(records, len(scenario.rank_hosts()), transport,
                        "flows" if flows is not None else "training step")
             if scenario.workload.steps else summary_table(records, plan, transport, link_rows))
    if flows is not None:
        table += flow_lines(rows.messages, scenario, transport)
    return Collected(table, frames["iterations"], frames["qps"])


def summary_table(records: list[IterationRecord], plan: FabricPlan, transport: str,
                  link_rows: list[dict[str, Any]] | None) -> str:
    """The nccl-tests table of the iterations every rank completed (an agent that failed
    reported none or part of its own), the gaps between them, the share of the ideal: of
    the bandwidth alone and with the path latency (testbed/run/ideal.py)."""
    scenario = plan.scenario
    world = len(scenario.rank_hosts())
    ranks: dict[int, set[int]] = {}
    for r in records:
        ranks.setdefault(r.iteration, set()).add(r.rank)
    whole = [r for r in records if len(ranks[r.iteration]) == world]
    rows = nccl.summarize(whole, world)
    over = f"{transport} ({scenario.variant(transport)})"
    if not rows:
        return (f"# {scenario.workload.collective} over {over}, {world} ranks: no iteration "
                f"completed on every rank (an agent failed)\n"
                + _overflow_line(scenario, link_rows))
    table = nccl.format_table(rows, transport=over, world=world)
    if len(whole) < len(records):
        table += (f"# Incomplete           : {len(ranks) - len(whole) // world} iterations "
                  f"lack a rank (an agent failed); left out\n")
    table += _gap_line(records)
    ideal, planes = scenario.ideal_busbw(transport)
    table += (f"# Ideal bus bandwidth  : {ideal:.4g} GB/s ({planes} plane"
              f"{'s' if planes > 1 else ''} x {format_rate(scenario.fabric.host_link.rate)}); "
              f"measured {rows[0].busbw / ideal:.0%} of it\n")
    return table + _latency_line(plan, transport, rows[0].time_us / 1e6) + _overflow_line(
        scenario, link_rows)


def _latency_line(plan: FabricPlan, transport: str, measured: float) -> str:
    """The ideal iteration with the hops' latency, and the share of it the mean iteration
    (emulated seconds) reached; real-frame times beside where the scenario has them."""
    best = ideal_iteration(plan, transport)
    if best is None:
        return ""
    frame = Frame.of(plan.scenario)

    def both(seconds: float) -> str:
        real = f" ({format_time(frame.in_real(seconds))} real)" if frame.real else ""
        return f"{format_time(seconds)}{real}"
    share = best.seconds / measured
    beyond = ("; above 100%: faster than the stated links and latencies allow (a shaper's "
              "burst above line rate, or held datagrams released early)" if share > 1 else "")
    return (f"# Ideal with latency   : {both(best.seconds)} an iteration ({best.steps} steps: "
            f"bytes at line rate {both(best.serialization)}, hops {both(best.latency)}); "
            f"measured {share:.0%} of it{beyond}\n")


def _overflow_line(scenario: Scenario, link_rows: list[dict[str, Any]] | None) -> str:
    """In lossless mode, what the router ports dropped past their lossless limit (the memory
    budget, testbed/scenario/limits.py LOSSLESS_MEMORY): a run with any is not lossless."""
    if not scenario.switch.lossless or not link_rows:
        return ""
    counts: dict[tuple[str, str], list[int]] = {}
    for row in link_rows:
        if row.get("lossless_overflow") is not None:
            counts.setdefault((row["node"], row["ifname"]), []).append(row["lossless_overflow"])
    per_port = {port: max(c) - min(c) for port, c in counts.items()}
    total = sum(per_port.values())
    if not total:
        return "# Lossless overflow    : none (no router port dropped past its lossless limit)\n"
    worst = max(per_port, key=lambda p: per_port[p])
    return (f"# Lossless overflow    : {total} packets at {sum(1 for n in per_port.values() if n)} "
            f"ports (most {per_port[worst]} at {worst[0]} {worst[1]}) dropped past the "
            f"lossless limit: queues outgrew the memory budget; NOT a lossless run\n")
