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
from typing import TYPE_CHECKING, Any, cast

from hostagent import compiled
from hostagent.workloads import nccl
from hostagent.workloads.iterations import IterationRecord
from runcontract.meta import (
    Background,
    Faults,
    Fidelity,
    JobRecord,
    ProtocolBuild,
    Status,
    Telemetry,
    read_meta,
)
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
from testbed.lifecycle.files import write_meta
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
from testbed.run.traffic import AgentOutcome, Part, nic_limits, run_jobs
from testbed.run.waiting import stuck
from testbed.scenario import Scenario, describe
from testbed.scenario.background import flows
from testbed.scenario.job_views import lines as job_lines
from testbed.scenario.job_views import views
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
    solo: bool = True  # with jobs: each job alone too, after them together (its control)


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
    for line in job_lines(scenario):
        progress.say(f"  {line}")
    cluster = scenario.cluster  # the servers under the fabric, the same at any rate
    with interrupts.deferred(), contextlib.ExitStack() as held:
        with progress.phase("preflight") as info:
            found = preflight(progress, held)
            features.require_netem(found, scenario)
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
        seeded = found.get("ecmp_hash_seed", True)
        if seeded is not True:
            progress.say(f"  note: {seeded}")
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
            if transport is not None and scenario.jobs and options.solo:
                _solo_controls(dirs[-1], plan, scenario_text, options, progress, found,
                               transport, rate_auto)
    return dirs


def _solo_controls(shared: Path, plan: FabricPlan, scenario_text: str, options: RunOptions,
                   progress: Progress, found: dict[str, bool | str], transport: Transport,
                   rate_auto: dict[str, Any] | None) -> None:
    """Each job of the run in `shared` alone on a fabric of its own, built from the same plan
    and seed, with the same fault timeline and background flows, started at the same time
    after the common start: its control. Its time beside the others over its time alone is
    the slowdown the other jobs cost it; the comparison joins the run's summary."""
    meta = read_meta(shared)
    record = None
    try:
        for record in meta.jobs:
            view = next(v for v in views(plan.scenario) if v.name == record.name)
            progress.say(f"job {record.name} alone (its control), over {record.transport}:")
            solo = _run_once(replace(plan, scenario=view.scenario), scenario_text,
                             replace(options, results_base=shared / "solo"), progress, found,
                             cast(Transport, record.transport), rate_auto,
                             record.model_copy(update={"solo": True, "time_s": None}))
            control = read_meta(solo)
            record.solo_run = f"solo/{solo.name}"
            record.solo_verdict = control.verdict
            record.solo_time_s = None if control.job is None else control.job.time_s
            record.solo_gave_up = control.job is not None and control.job.gave_up
        text = jobs_table(meta.jobs, meta.verdict)
    except BaseException as exc:  # the jobs together are kept; the comparison says why not
        text = (f"# jobs alone: no comparison, the control of job "
                f"{record.name if record else '?'} ended with "
                f"{'an interrupt' if isinstance(exc, KeyboardInterrupt) else 'an error'} "
                f"(solo/{record.name if record else ''})")
        raise
    finally:
        progress.say(text)
        write_meta(shared, meta)
        with (shared / "summary.txt").open("a") as f:
            f.write(text + "\n")


def jobs_table(records: list[JobRecord], verdict: str | None) -> str:
    """Each job beside the others against alone: the slowdown the others cost it."""
    lines = ["# jobs together against each alone (same fabric, seed and timeline; time: the "
             "mean timed iteration or step)",
             f"#  {'job':<12} {'transport':<9} {'ranks':>5} {'together':>12} {'alone':>12} "
             f"{'slowdown':>9}  placement"]
    for r in records:
        def ms(t: float | None) -> str:
            return "-" if t is None else f"{t * 1e3:.2f} ms"
        slow = "-" if r.slowdown is None else f"{r.slowdown:.3f}x"
        gave = [w for w, g in (("together", r.gave_up), ("alone", r.solo_gave_up)) if g]
        lines.append(f"   {r.name:<12} {r.transport:<9} {len(r.hosts):>5} {ms(r.time_s):>12} "
                     f"{ms(r.solo_time_s):>12} {slow:>9}  {r.placement}: {' '.join(r.hosts)}"
                     + (f"; a QP gave up {' and '.join(gave)}" if gave else ""))
    judged = [verdict] + [r.solo_verdict for r in records]
    if any(v != "faithful" for v in judged):
        lines.append("# NOT a result: a run here was not judged faithful (together: "
                     f"{verdict}; alone: {', '.join(str(r.solo_verdict) for r in records)})")
    return "\n".join(lines)


def _run_once(plan: FabricPlan, scenario_text: str, options: RunOptions, progress: Progress,
              found: dict[str, bool | str], transport: Transport | None,
              rate_auto: dict[str, Any] | None = None, solo: JobRecord | None = None) -> Path:
    """One transport's run on a fabric of its own, built from the run's one plan (its
    scenario at the rate chosen), recorded in a results folder of its own; `solo`: the
    plan is one job's, run alone as its control (in the folder named for it)."""
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
                             scenario.seed, transport, folder=None if solo is None else solo.name)
        results.meta.job = solo
        results.meta.features = dict(found)
        results.meta.rate_auto = rate_auto  # the rate `auto` chose, its arithmetic, calibration
        results.save()
        progress.say(f"  results   {results.dir}")
        chakra, facts = scenario.workload.chakra, results.meta.facts
        if chakra is not None and facts is not None and facts.ctrl_deps_dropped is not None:
            progress.say(f"  {chakra.loaded_line(facts.ctrl_deps_dropped)}")
        registry = RunRegistry(results.run_id, results.dir, scenario.name)
        network = make_network(plan, registry, progress)
        _build_and_use(network, results, options, progress, transport, solo)
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
                   progress: Progress, transport: Transport | None,
                   solo: JobRecord | None = None) -> None:
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
        _run_workload(network, results, progress, transport, options.capture, solo)
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


def _bounds(scenario: Scenario, transports: list[Transport], period: float) -> fidelity.Bounds:
    nic = nic_limits(scenario)
    return fidelity.Bounds(port_queue_s=nic.limit * 8 / nic.rate_bps,
                           timeout_s=min(timers(scenario, t).timeout for t in transports),
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
    mean = _mean_time(iterations, len(scenario.rank_hosts()))
    if mean is None:
        mean = float("nan")
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


@dataclass(frozen=True)
class _Job:
    """One job's share of a run: its plan (the fabric's, its one-job scenario), transport,
    results folder and start (emulated s after the common start). A run of one workload is
    one such job, whose folder is the run's."""

    name: str | None
    plan: FabricPlan
    transport: Transport
    results: RunResults
    start: float = 0.0
    record: JobRecord | None = None

    @property
    def out(self) -> Path:
        return self.results.dir / "agents"

    def part(self) -> Part:
        return Part(self.plan.scenario, self.transport, self.out, self.start)


def _jobs(network: Network, results: RunResults, transport: Transport,
          solo: JobRecord | None) -> list[_Job]:
    """The run's jobs, each with a folder of its own in `jobs/` (for several), or the one
    workload in the run's folder (`solo`: a job alone, started when it starts beside others)."""
    plan = network.plan
    scenario = plan.scenario
    frame = Frame.of(scenario)
    if not scenario.jobs:
        start = 0.0 if solo is None else frame.emulated(solo.start_s)
        return [_Job(None, plan, transport, results, start, solo)]
    out = []
    for view in views(scenario):
        t = view.transport_in(transport)
        record = JobRecord(name=view.name, hosts=list(view.hosts), placement=view.placement,
                           start_s=view.start, transport=t)
        mine = RunResults(results.dir / "jobs", view.scenario, results.scenario_text,
                          scenario.seed, t, folder=view.name)
        mine.meta.run_id = f"{results.run_id}/jobs/{view.name}"
        mine.meta.job = record
        mine.meta.features = results.meta.features
        mine.save()
        results.parts.append(mine)
        out.append(_Job(view.name, replace(plan, scenario=view.scenario), t, mine,
                        frame.emulated(view.start), record))
    results.meta.jobs = [j.record for j in out if j.record is not None]
    results.save()
    return out


def _run_workload(network: Network, results: RunResults, progress: Progress,
                  transport: Transport, capture: tuple[str, ...],
                  solo: JobRecord | None = None) -> None:
    """The agents' workload (every job's) with every instrument around it, then the tables,
    the verdict and the summary. QPs that gave up are the run's outcome (meta.json
    `gave_up`); agents that failed for any other reason, or a fault timeline that could not
    be applied, fail the run."""
    jobs = _jobs(network, results, transport, solo)
    tools = _Instruments.on(network, results.dir, capture)
    with progress.phase("traffic") as info:
        outcomes = _traffic(network, results, tools, jobs)
        info["done"] = "; ".join(_traffic_line(j, o) for j, o in zip(jobs, outcomes, strict=True))
    with progress.phase("collect") as info:
        table = _collect(network, results, tools, jobs, outcomes)
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
    for job, done in zip(jobs, outcomes, strict=True):
        failed = [o for o in done if o.result.get("status") != "ok"]
        _raise_unexplained(unexplained(failed, job.results.meta.gave_up), done, job.transport,
                           job.out)


def _traffic_line(job: _Job, outcomes: list[AgentOutcome]) -> str:
    """'all_reduce of 1 MiB x 5 on 8 ranks over mrc: every rank verified', the job named."""
    w = job.plan.scenario.workload
    failed = sum(o.result.get("status") != "ok" for o in outcomes)
    what = (f"{w.collective} of {format_size(w.size)}" if not w.steps else
            "flows" if w.flows else "training step")
    return ((f"job {job.name}: " if job.name else "")
            + f"{what} x {w.iterations} on {len(outcomes)} ranks over {job.transport}: "
            + ("every rank verified" if not failed else f"{failed} ranks FAILED"))


def _traffic(network: Network, results: RunResults, tools: _Instruments,
             jobs: list[_Job]) -> list[list[AgentOutcome]]:
    """Every job's agents, from their common start (which starts the fault timeline and the
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
        return run_jobs(network, [j.part() for j in jobs], on_start=start_timeline)
    finally:
        tools.injector.stop()
        tools.background.stop()
        tools.sampler.stop()
        tools.monitor.stop()
        tools.captures.stop()


def _collect(network: Network, results: RunResults, tools: _Instruments, jobs: list[_Job],
             outcomes: list[list[AgentOutcome]]) -> str:
    """Each job's tables, meta.json's records of the instruments, the QPs that gave up and the
    fidelity verdict (one for the run: every job's agents and the fabric's ports); the
    summary as printed (also summary.txt), a block per job."""
    meta = results.meta
    done = [collect(j.out, j.results.dir, o, j.plan, j.transport, tools.sampler.rows,
                    tools.injector.rows, None if j.record is None else j.record.name)
            for j, o in zip(jobs, outcomes, strict=True)]
    bounds = _bounds(network.plan.scenario, sorted({j.transport for j in jobs}),
                     tools.sampler.period)
    lags = [lag for j, o, d in zip(jobs, outcomes, done, strict=True)
            for lag in _agent_lags(j.out, o, d.iterations, bounds.port_queue_s)]
    verdict = _judge(tools.monitor, tools.sampler, lags, bounds, meta.workload_start)
    every = [o for group in outcomes for o in group]
    shared = {
        "faults": Faults(actions=len(tools.injector.actions), error=tools.injector.error),
        "protocol": ProtocolBuild(**compiled.agreement({o.host: o.result.get("protocol")
                                                     for o in every})),
        "background": Background(**tools.background.summary()),
        "telemetry": _telemetry_record(tools.sampler),
        "fidelity": Fidelity.model_validate(verdict.to_json())}
    blocks = []
    for job, d in zip(jobs, done, strict=True):
        m = job.results.meta
        for key, value in shared.items():
            setattr(m, key, value)
        m.workload_start = meta.workload_start  # faults count from the common start
        if tools.background.flows and m.facts is not None and m.workload_start is not None:
            ran = tools.background.windows(m.workload_start, list(m.facts.background))
            m.facts = replace(m.facts, background=tuple(ran))  # what ran, for the figures
        m.gave_up = gave_up(d.qps, job.plan.scenario.rank_hosts(), m.workload_start)
        if job.record is not None:
            job.record.time_s = _mean_time(d.iterations, len(job.plan.scenario.rank_hosts()))
            job.record.gave_up = bool(m.gave_up)
        write_fidelity_tables(job.results.dir, tools.monitor)
        table = _summary(job, d.table, verdict, d.iterations)
        job.results.save()
        job.results.write_text("summary.txt", table + "\n")
        blocks.append(table if job.name is None or job.record is None else
                      f"## job {job.name}: {job.record.placement}, "
                      f"{' '.join(job.plan.scenario.rank_hosts())}, {job.transport}\n{table}")
    if jobs[0].name is None:
        return blocks[0]
    for key, value in shared.items():
        setattr(meta, key, value)
    meta.gave_up = [g for j in jobs for g in j.results.meta.gave_up]  # meta.jobs: _jobs's
    write_fidelity_tables(results.dir, tools.monitor)
    table = "\n".join(blocks)
    results.save()
    results.write_text("summary.txt", table + "\n")
    return table


def _summary(job: _Job, table: str, verdict: fidelity.Verdict, iterations: pd.DataFrame) -> str:
    """One job's summary: its table, the run's verdict, the frame, its algorithm, the protocol
    build, the QPs that gave up."""
    meta, scenario = job.results.meta, job.plan.scenario
    assert meta.protocol is not None
    chosen = None if meta.facts is None else meta.facts.algorithm_line()
    return (table + verdict.line() + "\n" + _dilation_line(scenario, iterations)
            + (f"# Algorithm            : {chosen}\n" if chosen else "")
            + f"# Protocol build       : {compiled.line(meta.protocol.model_dump())}\n"
            + "".join(f"# Gave up              : {g.line()}; a job would abort here\n"
                      for g in meta.gave_up))


def _mean_time(iterations: pd.DataFrame, world: int) -> float | None:
    """The mean timed iteration (nccl-tests' time; a step's first start to last end) over the
    iterations every rank completed, or None where none did."""
    timed = iterations[~iterations["warmup"].astype(bool) & iterations["start"].notna()]
    whole = timed.groupby("iteration")["rank"].transform("nunique") == world
    records = IterationRecord.of_rows(timed[whole].to_dict("records"))
    return nccl.loop_time(records) if records else None


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
