"""One run, phase by phase, with a teardown that always happens.

Phases: preflight (root, kernel features, leftovers of crashed runs) -> plan (pure) -> nodes ->
links -> routes -> verify -> hold/CLI -> teardown. SIGINT, SIGTERM and SIGHUP become an
`Interrupted` exception (see interrupts.py), so the same `finally` tears down after a normal
end, an error or a signal; signals are ignored during teardown so a second Ctrl-C cannot
leave it half done. The results folder's meta.json records how the run ended and in which phase.
"""
from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostagent import compiled
from hostagent.workloads import nccl
from hostagent.workloads.iterations import IterationRecord
from runcontract.meta import Background, Faults, Fidelity, ProtocolBuild, Status, Telemetry
from testbed.cluster.network import placement_lines, underlay_traffic
from testbed.cluster.network import preflight as cluster_preflight
from testbed.emulation.background import BackgroundTraffic
from testbed.emulation.capture import Captures, port_of
from testbed.emulation.fidelity_monitor import FidelityMonitor
from testbed.emulation.injector import Injector
from testbed.emulation.network_api import Network
from testbed.emulation.telemetry import Sampler
from testbed.errors import EnvironmentProblem, TestbedError, VerificationFailed
from testbed.fabric.frame import Frame, dilation
from testbed.fabric.plan import FabricPlan, make_plan
from testbed.fabric.timeline import check_plan, schedule
from testbed.fabric.timers import timers
from testbed.kernel import features
from testbed.kernel.fabric_queue import FabricQueues
from testbed.kernel.link_gap import EDGES_PCT
from testbed.lifecycle import cleanup, interrupts, registry
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import RunRegistry
from testbed.run import feasible
from testbed.run import verdict as fidelity
from testbed.run.build import (
    build,
    fabric,  # noqa: F401 (scripts and tests import it from here)
    make_network,
)
from testbed.run.collect import collect
from testbed.run.gave_up import gave_up, unexplained
from testbed.run.results import RunResults
from testbed.run.traffic import AgentOutcome, nic_limits, run_agents
from testbed.run.waiting import stuck
from testbed.scenario import Scenario, describe
from testbed.scenario.background import flows
from testbed.scenario.schema import Transport
from testbed.scenario.units import format_rate, format_size

if TYPE_CHECKING:
    import pandas as pd  # only once there are results


@dataclass
class RunOptions:
    results_base: Path
    verify_only: bool = False
    hold: float = 0.0
    cli: bool = False
    capture: tuple[str, ...] = ()  # interface names to capture during the workload
    calibrate: bool = False  # measure this machine's packet budget again (rate: auto)


def preflight(progress: Progress, stack: contextlib.ExitStack) -> dict[str, bool | str]:
    """Root, Mininet, the run lock (held until `stack` closes, the end of the run), leftovers of
    crashed runs cleaned, no other run active, the kernel's features."""
    features.require_root()
    features.require_mininet()
    stack.enter_context(registry.run_lock())
    problems: list[str] = []
    for record, killed in cleanup.clean_stale(problems):
        progress.say(f"  cleaned what crashed run {record.run_id} left: {len(record.nodes)} "
                     f"nodes recorded, {killed} of their processes still running were ended")
    for problem in problems:
        progress.say(f"  registry: {problem}")
    live = [r for r in registry.read_all() if r.runner_alive()]
    if live:
        r = live[0]
        raise EnvironmentProblem(
            f"another run is active: {r.run_id} (pid {r.runner_pid}); two fabrics on two cores "
            f"would make both runs' numbers meaningless",
            f"wait for it, or stop it with `kill {r.runner_pid}`")
    return features.require_fabric_features()


def run(scenario: Scenario, scenario_text: str, options: RunOptions,
        progress: Progress) -> list[Path]:
    """Build, verify, then run the workload once per transport (each on a fabric of its own,
    built from the same seed, so results compare 1:1), or hold the fabric / open the CLI.
    Always tears down. Returns the results folders."""
    progress.say(describe(scenario))
    cluster = scenario.cluster  # the servers under the fabric, the same at any rate
    with interrupts.deferred(), contextlib.ExitStack() as held:
        with progress.phase("preflight") as info:
            found = preflight(progress, held)
            delays = [i for i, f in enumerate(scenario.faults) if f.kind == "delay"]
            if delays and found.get("netem") is not True:
                raise EnvironmentProblem(
                    f"faults.{delays[0]} adds delay, which needs sch_netem: {found.get('netem')}",
                    "use a kernel with netem (stock Ubuntu/Debian kernels, e.g. the Vagrant "
                    "VM), or remove the delay faults")
            done = ("root, Mininet, " + ("SRv6 next-csid, seg6local counters"
                                         if found["end_sids"] == "seg6local" else
                                         "End SIDs in eBPF (this kernel has no seg6local)")
                    + ", htb")
            if scenario.switch.enabled:
                FabricQueues().close()  # built and accepted by this kernel, or a clear error
                found["fabric_queue"] = True
                done += ", eBPF ECN/trimming"
            if cluster is not None:
                cluster_preflight(cluster)
                done += ", cluster tools (sshd, ssh, nsenter, ethtool)"
            info["done"] = done
        rate_auto = None
        only_fabric = options.verify_only or options.cli or options.hold > 0
        auto = scenario.auto_links()
        if auto or options.calibrate:
            from testbed.run import calibrate  # builds a fabric of its own: only when asked
            if auto:
                scenario, rate_auto = calibrate.choose(scenario, progress, options.calibrate,
                                                       workload=not only_fabric)
            else:
                calibrate.calibrate(progress)
        if not only_fabric:  # at the rate that will run, before any build
            progress.say(feasible.check(scenario, scenario.name).lines()[-1])
        plan = make_plan(scenario)  # once per run: every phase and transport is handed it
        check_plan(plan, scenario.name)  # the fault timeline, at the rate that will run
        if cluster is not None:
            for line in placement_lines(plan):
                progress.say(f"  {line}")
        for ifname in options.capture:
            port_of(plan, ifname)  # a typo fails now, not after the build
        transports: list[Transport | None] = ([None] if only_fabric
                                               else list(scenario.transport))
        dirs = []
        for transport in transports:
            if transport is not None:
                progress.say(f"transport {transport}:")
            dirs.append(_run_once(plan, scenario_text, options, progress, found, transport,
                                  rate_auto))
    return dirs


def _run_once(plan: FabricPlan, scenario_text: str, options: RunOptions, progress: Progress,
              found: dict[str, bool | str], transport: Transport | None,
              rate_auto: dict[str, Any] | None = None) -> Path:
    """One transport's run on a fabric of its own, built from the run's one plan (its
    scenario at the rate chosen), recorded in a results folder of its own."""
    scenario = plan.scenario
    results: RunResults | None = None
    registry: RunRegistry | None = None
    network: Network | None = None
    status: Status = "failed"
    error: str | None = None
    phase: str | None = None
    original: BaseException | None = None
    try:
        results = RunResults(options.results_base, scenario, scenario_text,
                             scenario.seed, transport)
        results.meta.features = dict(found)
        results.meta.rate_auto = rate_auto  # the rate `auto` chose, its arithmetic, calibration
        results.save()
        progress.say(f"  results   {results.dir}")
        chakra, facts = scenario.workload.chakra, results.meta.facts
        if chakra is not None and facts is not None and facts.ctrl_deps_dropped is not None:
            progress.say(f"  {chakra.loaded_line(facts.ctrl_deps_dropped)}")
        registry = RunRegistry(results.run_id, results.dir, scenario.name)
        network = make_network(plan, registry, progress)
        _build_and_use(network, results, options, progress, transport)
        status = "gave_up" if results.meta.gave_up else "complete"
    except KeyboardInterrupt as exc:  # Interrupted, from interrupts.checkpoint
        status, error, phase = "interrupted", str(exc) or "interrupted", progress.current
        original = exc
        raise
    except TestbedError as exc:
        error, phase, original = str(exc), progress.current, exc
        raise
    except BaseException as exc:
        error, phase, original = f"{type(exc).__name__}: {exc}", progress.current, exc
        raise
    finally:
        with interrupts.ignored():
            _end(network, registry, plan, progress, results, status, error, phase, original)
    assert results is not None
    return results.dir


def _end(network: Network | None, registry: RunRegistry | None, plan: FabricPlan,
         progress: Progress, results: RunResults | None, status: Status, error: str | None,
         phase: str | None,
         original: BaseException | None) -> None:
    """Tear down, then record how the run ended. When the run already failed, a failure here
    (a full disk, a process that would not die) is said, and the run's own error is the one
    raised: a second error must never hide the first."""
    first: Exception | None = None
    try:
        _teardown(network, registry, plan, progress)
    except Exception as exc:  # noqa: BLE001 (said, or raised below)
        if original is not None:
            _warn(exc)
        else:
            first, status = exc, "failed"
            error, phase = f"teardown: {type(exc).__name__}: {exc}", "teardown"
    if results is not None:
        try:
            results.meta.ended_in_phase = phase
            results.finish(status, error, progress.durations)
        except Exception as exc:  # noqa: BLE001 (said, or raised below)
            if original is not None or first is not None:
                _warn(exc)
            else:
                first = exc
    if first is not None:
        raise first


def _warn(exc: BaseException) -> None:
    print(f"warning: while ending the run after its error: {type(exc).__name__}: {exc}",
          file=sys.stderr, flush=True)


def _teardown(network: Network | None, registry: RunRegistry | None, plan: FabricPlan,
              progress: Progress) -> None:
    if network is not None:
        with progress.phase("teardown") as info:
            killed = network.close()
            info["done"] = f"{killed} processes ended, {len(plan.nodes)} namespaces removed"
    elif registry is not None:
        registry.close()


def _build_and_use(network: Network, results: RunResults, options: RunOptions,
                   progress: Progress, transport: Transport | None) -> None:
    network.results_dir = results.dir  # what runs on servers is gathered back into it

    def record_machines() -> None:
        facts = network.facts()
        if facts is not None:
            results.meta.cluster = facts
            results.save()

    report = build(network, progress, prepared=record_machines)
    results.write_json("verify.json", report.to_json())
    if options.verify_only or not report.ok:
        progress.say(report.table())
    if not report.ok:
        raise VerificationFailed(
            f"{len(report.failures)} of {report.probed} paths did not forward as planned and "
            f"{len(report.mismatches)} End SID counters disagree (table above, all in "
            f"{results.dir}/verify.json)", "this is a testbed or kernel bug: please report it")
    if options.verify_only:
        return
    if transport is not None:
        before, t0 = network.underlay_counters(), time.monotonic()
        _run_workload(network, results, progress, transport, options.capture)
        if before:  # servers, with an underlay between them
            used = underlay_traffic(before, network.underlay_counters(), time.monotonic() - t0)
            assert results.meta.cluster is not None  # servers recorded them when prepared
            results.meta.cluster = {**results.meta.cluster, "underlay_during_workload": used}
            results.save()
            progress.say("# underlay (VXLAN between servers) during the workload: " + ", ".join(
                f"{s} sent {u['tx_bytes'] / 1e6:.2f} MB in {u['tx_packets']:,} packets "
                f"({u['tx_mbit_s']} Mbit/s), {u['errors']} errors, {u['drops']} drops"
                for s, u in used.items()))
    elif options.cli:
        from mininet.cli import CLI
        with progress.phase("cli", "Mininet CLI closed"):
            CLI(network.net)  # Mininet handles Ctrl-C in its prompt; a SIGTERM ends the run after
    elif options.hold > 0:
        with progress.phase("hold", f"held {options.hold:g} s"):
            progress.say(f"  holding the fabric for {options.hold:g} s (Ctrl-C ends it early)")
            with interrupts.immediate():
                time.sleep(options.hold)


def _agent_lags(out: Path, outcomes: list[AgentOutcome], iterations: pd.DataFrame,
                port_queue_s: float) -> list[fidelity.AgentLag]:
    """Each agent's timer lateness inside its own timed iterations (agents/<host>/
    loop_lag.json against iterations.parquet's start and end)."""
    lags = []
    pids: set[object] = set()
    for o in outcomes:
        path = out / o.host / "loop_lag.json"
        if not path.exists():
            continue
        mine = iterations[(iterations["host"] == o.host) & iterations["start"].notna()]
        windows = sorted(zip(mine["start"], mine["end"], strict=True))
        summary = dict(o.result.get("loop_lag") or {})
        if o.result.get("pid") in pids:  # a pooled process's CPU is its hosts' together:
            summary.pop("on_cpu_s", None)  # count it once, with its first host
            summary.pop("runq_s", None)
        pids.add(o.result.get("pid"))
        lag = fidelity.agent_lag(o.host, json.loads(path.read_text()), windows, port_queue_s,
                                 summary)
        if lag is not None:
            lags.append(lag)
    return lags


def _bounds(scenario: Scenario, period: float) -> fidelity.Bounds:
    nic = nic_limits(scenario)
    return fidelity.Bounds(port_queue_s=nic.limit * 8 / nic.rate_bps,
                           timeout_s=min(timers(scenario, t).timeout for t in scenario.transport),
                           telemetry_period_s=period)


def _judge(monitor: FidelityMonitor, sampler: Sampler, lags: list[fidelity.AgentLag],
           bounds: fidelity.Bounds, since: float | None) -> fidelity.Verdict:
    """The run's fidelity verdict from what the monitor, the telemetry and the agents saw:
    each machine that forwarded the fabric judged on its own ports, its own agents and its
    own CPU (from `since`, the agents' common start: their start-up is not the workload's);
    the worst of them is the run's."""
    times = sorted({r["time"] for r in sampler.rows})
    interval = max((b - a for a, b in zip(times, times[1:])), default=None)
    judged = []
    for machine in monitor.machines:
        hist, gap_ns, late_ns = machine.histogram()
        links = fidelity.LinkGaps(EDGES_PCT, hist, gap_ns, late_ns, machine.unavailable)
        cpu = machine.cpu(since)
        mine = [lag for lag in lags if lag.host in machine.nodes]
        observed = fidelity.Observed(links, mine, interval, cpu["busy_mean"], cpu["busy_max"],
                                     cpu["psi_some"], machine.cores, cpu["softirq"],
                                     cpu["runner"], cpu["steal"])
        judged.append((machine.label, fidelity.judge(observed, bounds)))
    return fidelity.combine(judged)


def _dilation_line(scenario: Scenario, iterations: pd.DataFrame) -> str:
    """With fabric.real_rate: the time-dilation factor and the timed iterations' time (the
    table's, nccl-tests') as emulated and at the real rate (the report's summary scales the CCT
    tail too)."""
    factor = dilation(scenario)
    if factor is None:
        return ""
    timed = iterations[~iterations["warmup"].astype(bool) & iterations["start"].notna()]
    records = IterationRecord.of_rows(timed.to_dict("records"))
    mean = nccl.loop_time(records) if records else float("nan")
    return (f"# Time dilation: {factor:,.0f}x (fabric.real_rate "
            f"{format_rate(scenario.fabric.real_rate or 0)} / host links "
            f"{format_rate(scenario.fabric.host_link.rate)}): mean time {mean * 1e6:.0f} us "
            f"emulated = {mean / factor * 1e6:.3g} us at the real rate\n")


def write_fidelity_tables(results_dir: Path, monitor: FidelityMonitor) -> None:
    """link_gaps.parquet (every port's histogram) and cpu.parquet (busy share over time)."""
    from runcontract.table_io import frame_of, write_table  # pandas: once there are results
    run = ("cluster",) if len(monitor.machines) > 1 else ()  # cpu rows name their machine
    for name, rows in (("link_gaps", monitor.port_rows), ("cpu", monitor.cpu_rows)):
        write_table(results_dir, name, frame_of(name, rows, run), run)


@dataclass
class _Instruments:
    """What watches and disturbs the fabric during the workload, started and stopped around
    the agents: the fault timeline, background flows, telemetry, the fidelity monitor and
    packet captures."""

    injector: Injector
    background: BackgroundTraffic
    sampler: Sampler
    monitor: FidelityMonitor
    captures: Captures

    @classmethod
    def on(cls, network: Network, results_dir: Path, capture: tuple[str, ...]) -> _Instruments:
        plan = network.plan
        scenario = plan.scenario
        frame = Frame.of(scenario)  # the timeline and the flows run in emulated seconds
        faults = frame.faults(scenario.faults)
        return cls(
            Injector(network, faults, schedule(plan, faults, scenario.routing.convergence_delay)),
            BackgroundTraffic(network, flows(list(plan.hosts), frame.background(
                scenario.background), scenario.seed), results_dir / "background"),
            Sampler(network, scenario.telemetry.period), FidelityMonitor(network),
            Captures(network, list(capture), results_dir))


def _run_workload(network: Network, results: RunResults, progress: Progress,
                  transport: Transport, capture: tuple[str, ...]) -> None:
    """The agents' workload with every instrument around it, then the tables, the verdict and
    the summary. QPs that gave up are the run's outcome (meta.json `gave_up`); agents that
    failed for any other reason, or a fault timeline that could not be applied, fail the run."""
    scenario = network.plan.scenario
    w = scenario.workload
    out = results.dir / "agents"
    tools = _Instruments.on(network, results.dir, capture)
    with progress.phase("traffic") as info:
        outcomes = _traffic(network, results, tools, transport, out)
        failed = [o for o in outcomes if o.result.get("status") != "ok"]
        what = (f"{w.collective} of {format_size(w.size)}" if not w.steps
                else "training step")
        info["done"] = (f"{what} x {w.iterations} on {len(outcomes)} ranks over {transport}: "
                        + ("every rank verified" if not failed else f"{len(failed)} ranks FAILED"))
    with progress.phase("collect") as info:
        table = _collect(network, results, tools, outcomes, transport)
        telemetry = results.meta.telemetry
        assert telemetry is not None
        info["done"] = ("iterations, messages, paths, ev_states, qps, links .parquet; "
                        f"telemetry {telemetry.samples} samples, "
                        f"{telemetry.cpu_share_of_one_core or 0:.0%} of a core")
    progress.say(table)
    bg = tools.background.summary()
    if bg["ran"] < bg["flows"]:
        progress.say(f"warning: {bg['flows'] - bg['ran']} of {bg['flows']} background flows did "
                     f"not run: {'; '.join(bg['failed'])} (all in {results.dir}/background/)")
    if tools.injector.error:
        raise TestbedError(f"the fault timeline could not be applied: {tools.injector.error}")
    _raise_unexplained(unexplained(failed, results.meta.gave_up), outcomes, transport, out)


def _traffic(network: Network, results: RunResults, tools: _Instruments, transport: Transport,
             out: Path) -> list[AgentOutcome]:
    """The agents, from their common start (which starts the fault timeline and the
    background flows) to their end, with the instruments running throughout."""

    def start_timeline(t0: float) -> None:
        results.meta.workload_start = t0  # what faults' `at` counts from (wall clock)
        tools.injector.start(t0)
        tools.background.start(t0)

    tools.captures.start()
    tools.monitor.start()
    tools.sampler.start()
    try:
        tools.injector.prepare()  # every node's nftables thread in its namespace before t0
        return run_agents(network, network.plan.scenario, transport, out,
                          on_start=start_timeline)
    finally:
        tools.injector.stop()
        tools.background.stop()
        tools.sampler.stop()
        tools.monitor.stop()
        tools.captures.stop()


def _collect(network: Network, results: RunResults, tools: _Instruments,
             outcomes: list[AgentOutcome], transport: Transport) -> str:
    """The tables, meta.json's records of the instruments, the QPs that gave up and the
    fidelity verdict; the summary as printed (also summary.txt)."""
    plan = network.plan
    scenario = plan.scenario
    out, meta = results.dir / "agents", results.meta
    done = collect(out, results.dir, outcomes, plan, transport, tools.sampler.rows,
                   tools.injector.rows)
    meta.faults = Faults(actions=len(tools.injector.actions), error=tools.injector.error)
    meta.protocol = ProtocolBuild(**compiled.agreement({o.host: o.result.get("protocol")
                                                        for o in outcomes}))
    meta.background = Background(**tools.background.summary())
    if tools.background.flows and meta.facts is not None and meta.workload_start is not None:
        ran = tools.background.windows(meta.workload_start, list(meta.facts.background))
        meta.facts = replace(meta.facts, background=tuple(ran))  # what ran, for the figures
    meta.telemetry = _telemetry_record(tools.sampler)
    bounds = _bounds(scenario, tools.sampler.period)
    lags = _agent_lags(out, outcomes, done.iterations, bounds.port_queue_s)
    verdict = _judge(tools.monitor, tools.sampler, lags, bounds, meta.workload_start)
    meta.fidelity = Fidelity.model_validate(verdict.to_json())
    meta.gave_up = gave_up(done.qps, scenario.rank_hosts(), meta.workload_start)
    write_fidelity_tables(results.dir, tools.monitor)
    chosen = None if meta.facts is None else meta.facts.algorithm_line()
    table = (done.table + verdict.line() + "\n" + _dilation_line(scenario, done.iterations)
             + (f"# Algorithm            : {chosen}\n" if chosen else "")
             + f"# Protocol build       : {compiled.line(meta.protocol.model_dump())}\n"
             + "".join(f"# Gave up              : {g.line()}; a job would abort here\n"
                       for g in meta.gave_up))
    results.save()
    results.write_text("summary.txt", table + "\n")
    return table


def _telemetry_record(sampler: Sampler) -> Telemetry:
    wall = (sampler.rows[-1]["time"] - sampler.rows[0]["time"]) if sampler.rows else 0.0
    return Telemetry(period_s=sampler.period, samples=sampler.samples,
                     queue_stats_every=sampler.queue_every,
                     cpu_seconds=round(sampler.cpu_seconds, 3),
                     cpu_share_of_one_core=round(sampler.cpu_seconds / wall, 4) if wall else None,
                     error=sampler.error)


def _raise_unexplained(failed: list[AgentOutcome], outcomes: list[AgentOutcome],
                       transport: str, out: Path) -> None:
    """Agents that failed with no QP giving up to explain it fail the run, the cause first
    (agents the runner stopped because of it come after)."""
    if not failed:
        return
    failed.sort(key=lambda o: "stopped_by_runner" in o.result)
    lines = "; ".join(f"{o.host}: {o.result.get('error')}" for o in failed[:4])
    waits = stuck({o.rank: {"host": o.host, **o.result} for o in outcomes})
    raise TestbedError(f"{len(failed)} of {len(outcomes)} agents failed over {transport}: "
                       f"{lines}" + (f". {waits}" if waits else ""),
                       f"each agent's log is in {out}/<host>/agent.log")
