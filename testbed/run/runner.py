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
from dataclasses import asdict, dataclass
from pathlib import Path

from hostagent import compiled
from hostagent.workloads import nccl
from hostagent.workloads.iterations import IterationRecord
from runcontract import CPU_COLUMNS, LINK_GAP_COLUMNS, BackgroundWindow, table_file
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
from testbed.fabric.frame import check as check_frame
from testbed.fabric.plan import make_plan
from testbed.fabric.timeline import schedule
from testbed.kernel import features
from testbed.kernel.fabric_queue import FabricQueues
from testbed.kernel.link_gap import EDGES_PCT
from testbed.lifecycle import cleanup, interrupts, registry
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import RunRegistry
from testbed.run import verdict as fidelity
from testbed.run import wall_time
from testbed.run.build import (
    build,
    fabric,  # noqa: F401 (scripts and tests import it from here)
    make_network,
)
from testbed.run.collect import collect
from testbed.run.results import RunResults
from testbed.run.traffic import nic_limits, run_agents
from testbed.run.waiting import stuck
from testbed.scenario import Scenario, describe
from testbed.scenario.background import flows
from testbed.scenario.units import format_rate, format_size


@dataclass
class RunOptions:
    results_base: Path
    verify_only: bool = False
    hold: float = 0.0
    cli: bool = False
    capture: tuple[str, ...] = ()  # interface names to capture during the workload
    calibrate: bool = False  # measure this machine's packet budget again (rate: auto)


def preflight(progress: Progress, stack: contextlib.ExitStack) -> dict:
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
            if scenario.cluster is not None:
                cluster_preflight(scenario.cluster)
                done += ", cluster tools (sshd, ssh, nsenter, ethtool)"
            info["done"] = done
        rate_auto = None
        only_fabric = options.verify_only or options.cli or options.hold > 0
        if scenario.auto_links() or options.calibrate:
            from testbed.run import calibrate  # builds a fabric of its own: only when asked
            if scenario.auto_links():
                scenario, rate_auto = calibrate.choose(scenario, progress, options.calibrate,
                                                       workload=not only_fabric)
            else:
                calibrate.calibrate(progress)
        if not only_fabric:  # at the rate that will run, before any build
            check_frame(scenario, scenario.name)
            progress.say(wall_time.check(scenario, scenario.name).lines()[-1])
        plan = make_plan(scenario)
        if scenario.cluster is not None:
            for line in placement_lines(plan):
                progress.say(f"  {line}")
        for ifname in options.capture:
            port_of(plan, ifname)  # a typo fails now, not after the build
        transports: list[str | None] = [None] if only_fabric else list(scenario.transport)
        dirs = []
        for transport in transports:
            if transport is not None:
                progress.say(f"transport {transport}:")
            dirs.append(_run_once(scenario, scenario_text, options, progress, plan, found,
                                  transport, rate_auto))
    return dirs


def _run_once(scenario: Scenario, scenario_text: str, options: RunOptions, progress: Progress,
              plan, found: dict, transport: str | None, rate_auto: dict | None = None) -> Path:
    results = registry = network = None
    status, error, phase = "failed", None, None
    original: BaseException | None = None
    try:
        results = RunResults(options.results_base, scenario, scenario_text,
                             scenario.seed, transport)
        results.meta["features"] = found
        if rate_auto is not None:  # the rate `auto` chose, the arithmetic and the calibration
            results.meta["rate_auto"] = rate_auto
        results.save()
        progress.say(f"  results   {results.dir}")
        registry = RunRegistry(results.run_id, results.dir, scenario.name)
        network = make_network(plan, registry, progress)
        _build_and_use(network, results, options, progress, transport)
        status = "complete"
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


def _end(network: Network | None, registry: RunRegistry | None, plan, progress: Progress,
         results: RunResults | None, status: str, error: str | None, phase: str | None,
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
            results.meta["ended_in_phase"] = phase
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


def _teardown(network: Network | None, registry: RunRegistry | None, plan,
              progress: Progress) -> None:
    if network is not None:
        with progress.phase("teardown") as info:
            killed = network.close()
            info["done"] = f"{killed} processes ended, {len(plan.nodes)} namespaces removed"
    elif registry is not None:
        registry.close()


def _build_and_use(network: Network, results: RunResults, options: RunOptions,
                   progress: Progress, transport: str | None) -> None:
    network.results_dir = results.dir  # what runs on servers is gathered back into it

    def record_machines() -> None:
        facts = network.facts()
        if facts is not None:
            results.meta["cluster"] = facts
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
            results.meta["cluster"]["underlay_during_workload"] = used
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


def _agent_lags(out: Path, outcomes, iterations, port_queue_s: float) -> list[fidelity.AgentLag]:
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
                           timeout_s=scenario.timeout(), telemetry_period_s=period)


def _judge(monitor: FidelityMonitor, sampler: Sampler, lags: list[fidelity.AgentLag],
           scenario: Scenario, period: float, since: float | None) -> fidelity.Verdict:
    """The run's fidelity verdict from what the monitor, the telemetry and the agents saw:
    each machine that forwarded the fabric judged on its own ports, its own agents and its
    own CPU (from `since`, the agents' common start: their start-up is not the workload's);
    the worst of them is the run's."""
    times = sorted({r["time"] for r in sampler.rows})
    interval = max((b - a for a, b in zip(times, times[1:])), default=None)
    bounds = _bounds(scenario, period)
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


def _dilation_line(scenario: Scenario, iterations) -> str:
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
    import pandas as pd  # only once there are results
    pd.DataFrame(monitor.port_rows, columns=list(LINK_GAP_COLUMNS)).to_parquet(
        results_dir / table_file("link_gaps"), index=False)
    several = ["server"] if len(monitor.machines) > 1 else []  # each row's machine
    pd.DataFrame(monitor.cpu_rows, columns=[*CPU_COLUMNS, *several]).to_parquet(
        results_dir / table_file("cpu"), index=False)


def _run_workload(network: Network, results: RunResults, progress: Progress,
                  transport: str, capture: tuple[str, ...]) -> None:
    scenario = network.plan.scenario
    w = scenario.workload
    hosts = scenario.rank_hosts()
    out = results.dir / "agents"
    sampler = Sampler(network, scenario.telemetry.period)
    frame = Frame.of(scenario)  # the timeline and the flows run in emulated seconds
    faults = frame.faults(scenario.faults)
    injector = Injector(network, faults, schedule(network.plan, faults,
                                                  scenario.routing.convergence_delay))
    hosts_all = list(network.plan.hosts)
    background = BackgroundTraffic(
        network, flows(hosts_all, frame.background(scenario.background), scenario.seed),
        results.dir / "background")

    def start_timeline(t0: float) -> None:
        results.meta["workload_start"] = t0  # what faults' `at` counts from (wall clock)
        injector.start(t0)
        background.start(t0)

    captures = Captures(network, list(capture), results.dir)
    monitor = FidelityMonitor(network)
    with progress.phase("traffic") as info:
        captures.start()
        monitor.start()
        sampler.start()
        try:
            injector.prepare()  # every node's nftables thread in its namespace before t0
            outcomes = run_agents(network, scenario, transport, out, on_start=start_timeline)
        finally:
            injector.stop()
            background.stop()
            sampler.stop()
            monitor.stop()
            captures.stop()
        failed = [o for o in outcomes if o.result.get("status") != "ok"]
        what = (f"{w.collective} of {format_size(w.size)}" if not w.steps
                else "training step")
        info["done"] = (f"{what} x {w.iterations} on {len(hosts)} ranks over {transport}: "
                        + ("every rank verified" if not failed else f"{len(failed)} ranks FAILED"))
    with progress.phase("collect") as info:
        table, iterations = collect(out, results.dir, outcomes, scenario, transport,
                                    sampler.rows, injector.rows)
        results.meta["faults"] = {"actions": len(injector.actions), "error": injector.error}
        results.meta["protocol"] = compiled.agreement({o.host: o.result.get("protocol")
                                                       for o in outcomes})
        results.meta["background"] = background.summary()
        if background.flows and results.meta.get("facts") and "workload_start" in results.meta:
            scheduled = [BackgroundWindow(**w) for w in results.meta["facts"]["background"]]
            results.meta["facts"]["background"] = [asdict(w) for w in background.windows(
                results.meta["workload_start"], scheduled)]  # what ran, for the figures
        wall = (sampler.rows[-1]["time"] - sampler.rows[0]["time"]) if sampler.rows else 0.0
        results.meta["telemetry"] = {
            "period_s": sampler.period, "samples": sampler.samples,
            "queue_stats_every": sampler.queue_every, "cpu_seconds": round(sampler.cpu_seconds, 3),
            "cpu_share_of_one_core": round(sampler.cpu_seconds / wall, 4) if wall else None,
            "error": sampler.error}
        lags = _agent_lags(out, outcomes, iterations,
                           _bounds(scenario, sampler.period).port_queue_s)
        verdict = _judge(monitor, sampler, lags, scenario, sampler.period,
                         results.meta.get("workload_start"))
        results.meta["fidelity"] = verdict.to_json()
        write_fidelity_tables(results.dir, monitor)
        table += (verdict.line() + "\n" + _dilation_line(scenario, iterations)
                  + f"# Protocol build       : {compiled.line(results.meta['protocol'])}\n")
        results.save()
        results.write_text("summary.txt", table + "\n")
        info["done"] = ("iterations, messages, paths, ev_states, qps, links .parquet; "
                        f"telemetry {sampler.samples} samples, "
                        f"{results.meta['telemetry']['cpu_share_of_one_core'] or 0:.0%} of a core")
    progress.say(table)
    bg = results.meta["background"]
    if bg["ran"] < bg["flows"]:
        progress.say(f"warning: {bg['flows'] - bg['ran']} of {bg['flows']} background flows did "
                     f"not run: {'; '.join(bg['failed'])} (all in {results.dir}/background/)")
    if injector.error:
        raise TestbedError(f"the fault timeline could not be applied: {injector.error}")
    if failed:  # the cause first: agents the runner stopped because of it come after
        failed.sort(key=lambda o: "stopped_by_runner" in o.result)
        lines = "; ".join(f"{o.host}: {o.result.get('error')}" for o in failed[:4])
        waits = stuck({o.rank: {"host": o.host, **o.result} for o in outcomes})
        raise TestbedError(f"{len(failed)} of {len(outcomes)} agents failed over {transport}: "
                           f"{lines}" + (f". {waits}" if waits else ""),
                           f"each agent's log is in {out}/<host>/agent.log")
