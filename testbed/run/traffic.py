"""Running the workload on a built fabric: one agent per rank, started together, collected.

The runner writes each agent's config (hostagent/runtime/config.py) and starts the agents inside the
hosts' namespaces through Mininet: one process per host (`agents.mode: per_host`), or one
process per core, each serving a contiguous group of hosts (`pooled`, hostagent/runtime/pooled.py;
the process starts in its first host's namespace and opens every other host's sockets in that
host's namespace, so a crashed run's clean-up finds it in a recorded namespace). It then gives
every agent the same wall-clock start time (namespaces share the clock), waits for all of them
with a deadline, and reads what each wrote. An agent that fails is reported with its own error;
nothing waits forever, and a crashed agent ends the wait promptly (waiting.py), what completed
being kept.
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from hostagent.protocol.evs import EVPolicy
from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from hostagent.runtime.agent import PROGRESS_FILE, progress_count
from hostagent.runtime.config import (
    AgentConfig,
    DcqcnSettings,
    NicLimits,
    PeerConfig,
    WorkloadConfig,
)
from hostagent.runtime.driver import PORT as ROCE_PORT
from hostagent.workloads.flows import flows_job
from hostagent.workloads.graph import Job
from hostagent.workloads.training import training_job
from testbed.emulation.network_api import Network
from testbed.emulation.telemetry import DEFAULT_PERIOD
from testbed.errors import TestbedError
from testbed.fabric import paths
from testbed.fabric.dcqcn_gains import gains
from testbed.fabric.frame import Frame
from testbed.fabric.latency import ACROSS_A_SPINE, agent_latency, round_trip
from testbed.fabric.plan import FabricPlan
from testbed.fabric.timeline import straggler_windows
from testbed.fabric.timers import timers
from testbed.fabric.windows import windows
from testbed.lifecycle import interrupts
from testbed.run import algorithm
from testbed.run.waiting import ProgressRule, stop, wait_for_agents
from testbed.scenario import Scenario
from testbed.scenario.job_views import views
from testbed.scenario.schema import Transport

START_DELAY = 0.2  # seconds between the last agent being ready and the common start
READY_TIMEOUT = 60.0  # seconds for every agent to start Python and bind its sockets
FOREVER_DEADLINE = 600.0  # s of retries counted in the deadline when QPs retry forever


def agent_configs(plan: FabricPlan, scenario: Scenario, transport: Transport,
                  out: Path) -> dict[str, AgentConfig]:
    """Pure: every rank's config; EV i toward a peer is the same (plane, spine) both ways."""
    hosts = scenario.rank_hosts()
    q, m, w = scenario.qp, scenario.mrc, scenario.workload
    t = timers(scenario, transport)
    init_cwnd, max_cwnd = windows(scenario, transport)
    qp = t.qp_config(mss=q.mss, init_cwnd=init_cwnd, max_cwnd=max_cwnd,
                     target_delay=scenario.target_delay(), ack_every=q.ack_every,
                     line_rate=scenario.fabric.host_link.rate, base_rtt=base_rtt(scenario),
                     mpr=m.mpr)
    mrc = EVPolicy(active_per_plane=scenario.active_evs_per_plane(),
                   ev_min_active=m.ev_min_active, spray=m.spray,
                   probe_interval=t.probe_interval, probe_timeout=t.probe_timeout,
                   probe_successes=m.probe_successes, congestion_holdoff=t.congestion_holdoff,
                   congestion_memory_rtts=m.congestion_memory_rtts, hot_ratio=m.hot_ratio,
                   hot_rtts=m.hot_rtts, untrimmed_loss=m.untrimmed_loss)
    job = step_job(scenario)
    frame = Frame.of(scenario)
    dcqcn = (DcqcnSettings(**scenario.dcqcn.model_dump(), **asdict(gains(scenario)[0]))
             if transport == "rocev2" else None)
    configs = {}
    chosen = algorithm.resolve(scenario)
    for rank, host in enumerate(hosts):
        peers = []
        for r, peer in enumerate(hosts):
            if peer == host:
                continue
            evs = paths.entropy_values(plan, host, peer,
                                       m.evs_per_path if transport == "mrc" else 1)
            peers.append(PeerConfig(
                r, peer, [(i, e.plane, str(e.address)) for i, e in enumerate(evs)],
                [str(plan.plain_address(peer, p)) for p in range(plan.planes)],
                [i for i, e in enumerate(evs) if _denied(e, m.denied)],
                latency=agent_latency(plan, peer, host)))
        workload = WorkloadConfig(w.collective, w.size, w.iterations, w.warmup,
                                  frame.compute_gap(scenario),
                                  algorithm=chosen.algorithm or chosen.setting,
                                  cost_latency=chosen.fabric.latency_s,
                                  cost_rate=chosen.fabric.bytes_per_s)
        if job is not None:
            workload.steps = job.plan(rank).to_dict()
            workload.compute_scale = frame.dilation
            workload.compute_jitter = w.compute_jitter
            workload.stragglers = straggler_windows(frame.faults(scenario.faults), host)
        configs[host] = AgentConfig(
            rank, len(hosts), host, transport,
            [str(plan.plain_address(host, p)) for p in range(plan.planes)], peers,
            scenario.qps_per_peer(transport), qp, mrc, workload, scenario.seed,
            str(out / "start"), str(out / host), timeout=deadline_for(scenario), gso=q.gso,
            nic=nic_limits(scenario), ev_sample_period=ev_sample_period(
                scenario, transport, sum(len(p.evs) for p in peers)),
            dcqcn=dcqcn)
    return configs


def step_job(scenario: Scenario) -> Job | None:
    """The step every rank runs, built in, from a Chakra trace or as flows (rank r on the
    workload's r-th host), or None for the looped collective."""
    w = scenario.workload
    if w.chakra is not None:
        return w.chakra.job(scenario.rank_hosts())
    if w.flows is not None:
        hosts = scenario.rank_hosts()
        return flows_job(w.flows.pattern, w.flows.message, w.flows.messages, len(hosts), hosts)
    return None if w.training is None else training_job(w.training.spec(), scenario.rank_hosts())


MAX_SAMPLED_EVS = 256  # per agent: beyond, the load over time costs the agents too much CPU


def ev_sample_period(scenario: Scenario, transport: Transport, evs: int) -> float | None:
    """How often an MRC agent records each EV's load (the telemetry period), or None where it
    has more EVs than it can sample cheaply (ref-64: about 1,000 each): then only the final
    counters (paths.parquet) exist."""
    if transport != "mrc" or evs * scenario.qps_per_peer("mrc") > MAX_SAMPLED_EVS:
        return None
    return scenario.telemetry.period or DEFAULT_PERIOD


def _denied(ev: paths.EV, denied) -> bool:
    """A same-leaf EV crosses no spine: only a whole-plane denial removes it."""
    return any(d.plane == ev.plane and (d.spine is None or d.spine == ev.spine) for d in denied)


def base_rtt(scenario: Scenario) -> float:
    """Seconds a round trip takes across a spine with every queue empty: each store-and-forward
    hop (host port, leaf to spine, spine to leaf, leaf to host) serializes a full packet there
    and its ACK on the way back, and the links' latency is crossed both ways (the agents hold
    each datagram for it). DCQCN's timers are ratios to it (a peer on the same leaf is two
    hops closer)."""
    return round_trip(scenario, ACROSS_A_SPINE)


def nic_limits(scenario: Scenario) -> NicLimits:
    """How much a host port may have queued before its QPs wait (hostagent/protocol/nic.py): a few
    packets, or 4 ms of the line (the agents' timers are about a millisecond coarse, and the
    port must not run dry between two wake-ups), within half the port's buffer."""
    link = scenario.fabric.host_link
    packet = scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD
    limit = min(link.buffer // 2, max(4 * packet, link.rate // 8 * 4 // 1000))
    return NicLimits(link.rate, limit)


FIRST_ALLOWANCE = 60.0  # s beyond the first iteration's bytes at a tenth of the line rate


def progress_rule(scenario: Scenario) -> ProgressRule:
    """How long the run may go without an iteration completing (waiting.ProgressRule). The
    first iteration, before anything is measured: its bytes (4 x size covers every collective's
    per-rank traffic) at a tenth of the host link rate, the compute gap, and a minute for the
    agents to make and check their buffers; then multiples of what the run measures. Both
    allow a QP's whole retry schedule (with retries forever, 10 minutes)."""
    w, f = scenario.workload, scenario.fabric
    frame = Frame.of(scenario)
    per_iter = 4 * w.size * 8 / (f.host_link.rate * 0.1) + frame.compute_gap(scenario)
    job = step_job(scenario)
    if job is not None:  # a rank's whole step: its bytes and compute, one after the other,
        # compute at its slowest (jitter's top, the largest straggler factor)
        slowest = (1 + w.compute_jitter) * max(
            (cast(float, x.factor) for x in scenario.faults if x.kind == "straggler"), default=1)
        per_iter = max(4 * sum(n.bytes for n in g.nodes) * 8 / (f.host_link.rate * 0.1)
                       + sum(n.duration for n in g.nodes) * frame.dilation * slowest
                       for g in job.graphs)
    retries = min(FOREVER_DEADLINE, max(timers(scenario, t).time_to_fail()
                                        for t in scenario.transport))
    return ProgressRule(first_s=FIRST_ALLOWANCE + per_iter + retries, slack_s=retries)


def deadline_for(scenario: Scenario) -> float:
    """Seconds the whole workload may take at most, however it progresses: every iteration as
    long as the first may take (the agents' own bound too; the progress rule normally ends a
    hung run far sooner)."""
    w = scenario.workload
    return (w.iterations + w.warmup) * progress_rule(scenario).first_s


class AgentFiles:
    """The agents' small files (`ready`, `progress`, `result.json`) and the start file, where
    the machine holding each host keeps them: read and written through the network (here
    directly; in the cluster mode through the host's server agent, a batch per server)."""

    def __init__(self, network: Network, configs: dict[str, AgentConfig]) -> None:
        self.network = network
        self.configs = configs

    def read(self, name: str) -> dict[str, str | None]:
        """Host -> the text of its file `name`, None where it does not exist (yet)."""
        paths = {h: f"{c.out_dir}/{name}" for h, c in self.configs.items()}
        got = self.network.read_files(list(paths.items()))
        return {h: got.get(p) for h, p in paths.items()}

    def publish_start(self, start_at: float) -> None:
        """One start time for all, written once per machine, in that machine's clock."""
        done: set[tuple[str, str]] = set()
        for host, cfg in self.configs.items():
            where = (self.network.machine_of(host), cfg.start_file)
            if where not in done:
                done.add(where)
                self.network.write_files(
                    host, {cfg.start_file: repr(start_at + self.network.clock_offset(host))})


class IterationWatch:
    """The progress rule over the agents' `progress` files: an iteration counts as completed
    when every rank has completed it (the collective needs them all)."""

    def __init__(self, files: AgentFiles, rule: ProgressRule, start: float) -> None:
        self.files, self.rule, self.start = files, rule, start
        self.completions: list[float] = []

    def __call__(self, now: float) -> str | None:
        counts = [progress_count(text) for text in self.files.read(PROGRESS_FILE).values()]
        done = min(counts, default=0)
        self.completions += [now] * (done - len(self.completions))
        results = self.files.read("result.json")
        if all(text is not None for text in results.values()) and not _failed(results):
            return None  # every rank ended: this job waits on nothing (others may run on)
        return _failed(results) or self.rule.stalled(self.start, self.completions, now)


def _failed(results: dict[str, str | None]) -> str | None:
    """A host that has reported failure while its process lives on (pooled: the process
    serves other hosts, so its exit status cannot say it): the collective cannot complete."""
    for host, text in results.items():
        try:
            result = json.loads(text or "")
        except ValueError:
            continue
        if result.get("status") == "failed":
            return (f"the agent of {host} failed ({result.get('error')}): its peers "
                    f"cannot complete without it")
    return None


def _ready(files: AgentFiles, procs: dict[str, Any]) -> float:
    """Wait until every agent has bound its sockets; the common start time to publish."""
    deadline = time.time() + READY_TIMEOUT
    while True:
        ready = files.read("ready")
        if all(v is not None for v in ready.values()):
            break
        interrupts.checkpoint()
        dead = [h for h, p in procs.items() if p.poll() is not None]
        if not dead:  # pooled: a host that failed, its process alive
            results = files.read("result.json")
            dead = [h for h in ready if results[h] is not None and ready[h] is None]
        if dead or time.time() > deadline:
            why = (f"the agent of {dead[0]} ended before it was ready" if dead else
                   f"agents not ready after {READY_TIMEOUT:.0f} s")
            raise TestbedError(why, "see each agent's log in the results (agents/<host>/)")
        time.sleep(0.01)
    return time.time() + START_DELAY


@dataclass
class AgentOutcome:
    host: str
    rank: int
    returncode: int | None
    result: dict  # the agent's result.json, or {"status": "failed", "error": ...}


def agent_groups(hosts: list[str], processes: int) -> list[list[str]]:
    """Hosts split into at most `processes` contiguous groups whose sizes differ by at most 1
    (ring neighbours mostly share a process)."""
    n = max(1, min(processes, len(hosts)))
    bounds = [len(hosts) * k // n for k in range(n + 1)]
    return [hosts[bounds[k]:bounds[k + 1]] for k in range(n)]


def pools(where: dict[str, tuple[str, int]],
          processes: Callable[[str], int]) -> list[tuple[str, list[str]]]:
    """(machine, hosts) of each pooled process: host -> (its machine, its job) in `where`;
    each machine's `processes(machine)` shared among its jobs by their share of its hosts (at
    least one each), each job's hosts split into contiguous groups (agent_groups)."""
    by_job: dict[tuple[str, int], list[str]] = {}
    for host, key in where.items():
        by_job.setdefault(key, []).append(host)
    out = []
    for (machine, _), hosts in by_job.items():
        on_machine = sum(len(h) for (m, _), h in by_job.items() if m == machine)
        share = processes(machine) * len(hosts) / on_machine
        out += [(machine, group) for group in agent_groups(hosts, max(1, round(share)))]
    return out


def _start_pooled(network: Network, configs: dict[str, AgentConfig], out: Path,
                  processes: int | None, job_of: dict[str, int]) -> dict[str, Any]:
    """One process per core of each machine (or `processes` per machine), each serving a
    contiguous group of that machine's hosts, all of one job (`job_of`: host -> its job), so
    that a job can be stopped without the others: its share of the processes by its share of
    the machine's hosts, at least one."""
    procs: dict[str, Any] = {}
    where = {h: (network.machine_of(h), job_of[h]) for h in configs}
    for k, (_, group) in enumerate(pools(where, lambda m: processes or network.cores(m))):
        first = group[0]
        manifest = network.node_path(first, out / f"pool-{k}.json")
        network.write_files(first, {manifest: json.dumps({"hosts": [
            {"config": f"{configs[h].out_dir}/config.json",
             "netns": None if i == 0 else f"/proc/{network.pid(h)}/ns/net"}
            for i, h in enumerate(group)]}, indent=1)})
        proc = network.spawn(first, f"pool-{k}",
                             agent_command("hostagent.runtime.pooled", manifest),
                             network.node_path(first, out / f"pool-{k}.log"),
                             cwd=network.node_path(first, out))
        for h in group:
            procs[h] = proc
    return procs


def agent_command(module: str, arg: Path | str) -> list[str]:
    """How an agent process starts. `-P` (and the caller's explicit cwd): it runs as root, and
    `-m` would otherwise put the runner's working directory first on sys.path, so a planted
    hostagent/ there would run."""
    return [sys.executable, "-P", "-m", module, str(arg)]


def _gather(network: Network, configs: dict[str, AgentConfig], out: Path) -> None:
    """The agents' folder of every machine (each host's, the pool logs) brought back into the
    results: from each server in the cluster mode, a no-op on one machine."""
    first: dict[str, str] = {}
    for host in configs:
        first.setdefault(network.machine_of(host), host)
    for host in first.values():
        network.fetch(host, network.node_path(host, out), out)


STOPPED_AS_ASKED = "stopped by the runner: the measurement had what it needed"


@dataclass(frozen=True)
class Part:
    """One job's agents in a run: its one-job scenario (testbed/scenario/jobs.py), the
    transport its QPs run, its agents' folder, and when it starts after the common start
    (emulated s)."""

    scenario: Scenario
    transport: Transport
    out: Path
    start: float = 0.0


def parts(scenario: Scenario, transport: Transport, out: Path) -> list[Part]:
    """The scenario's jobs as parts, each in `out/<job>` (its one workload: one part in
    `out`), each job on its own transport where it names one."""
    if not scenario.jobs:
        return [Part(scenario, transport, out)]
    frame = Frame.of(scenario)
    return [Part(v.scenario, v.transport_in(transport), out / v.name, frame.emulated(v.start))
            for v in views(scenario)]


def run_agents(network: Network, scenario: Scenario, transport: Transport, out: Path,
               on_start: Callable[[float], None] | None = None,
               mode: str | None = None,
               stop_when: Callable[[float, list[float]], bool] | None = None
               ) -> list[AgentOutcome]:
    """The one job of `scenario` (run_jobs with a single part)."""
    return run_jobs(network, [Part(scenario, transport, out)], on_start, mode, stop_when)[0]


def run_jobs(network: Network, parts: list[Part],
             on_start: Callable[[float], None] | None = None,
             mode: str | None = None,
             stop_when: Callable[[float, list[float]], bool] | None = None
             ) -> list[list[AgentOutcome]]:
    """Start every rank's agent of every job, on the machine holding its host, wait for all,
    bring back what each wrote and return what each reported, per job. Every job's agents are
    started and made ready together; each job starts at the common start plus its own delay.
    `on_start` gets the common start time (wall clock) as soon as it is set: the fault
    timeline counts from it. `mode` overrides the scenario's `agents.mode`.
    `stop_when(now, done)`, asked at every look at the agents' progress with the time and when
    every rank of the first job had completed each iteration so far: True stops the agents
    still running (their results say so), for a measurement of part of the workload only
    (`rate: auto`'s pilot)."""
    groups: list[dict[str, AgentConfig]] = []
    for part in parts:
        out = part.out.absolute()  # agents start in their own folders: relative would miss
        out.mkdir(parents=True, exist_ok=True)
        configs = agent_configs(network.plan, part.scenario, part.transport, out)
        for host, cfg in configs.items():  # their folders where their machine keeps them
            cfg.out_dir = network.node_path(host, out / host)
            cfg.start_file = network.node_path(host, out / "start")
            cfg.workload.stragglers = [  # counted from the job's own start, as its agents do
                (a - part.start, None if b is None else b - part.start, f)
                for a, b, f in cfg.workload.stragglers]
        groups.append(configs)
    every = {h: c for configs in groups for h, c in configs.items()}
    assert len(every) == sum(map(len, groups)), "jobs share no host (scenario/jobs.py)"
    job_of = {h: k for k, configs in enumerate(groups) for h in configs}
    first = parts[0].scenario.agents
    procs: dict[str, Any] = {}
    stopped: dict[str, str] = {}  # host -> why the runner stopped its job
    try:
        procs = _spawn(network, every, parts[0].out.absolute(), mode or first.mode,
                       first.processes, job_of)
        start_at = _ready(AgentFiles(network, every), procs)
        watches = []
        for part, configs in zip(parts, groups, strict=True):
            files = AgentFiles(network, configs)
            files.publish_start(start_at + part.start)
            watches.append(IterationWatch(files, progress_rule(part.scenario),
                                          start_at + part.start))
        if on_start is not None:
            on_start(start_at)
        deadline = time.time() + max(p.start + deadline_for(p.scenario) for p in parts) + 10
        live = dict(procs)  # the agents of the jobs still running

        def looking(now: float) -> str | None:
            for k, watch in enumerate(watches):
                mine = {h: p for h, p in live.items() if job_of[h] == k}
                why = watch(now) if mine else None
                if why is not None and len(parts) > 1 and len(mine) < len(live):
                    stop_job(mine, why)  # a job that fails ends; the others run on
                elif why is not None:
                    return why
            if stop_when is not None and stop_when(now, watches[0].completions):
                return STOPPED_AS_ASKED
            return None

        def stop_job(mine: dict[str, Any], why: str) -> None:
            stopped.update((h, why) for h, p in mine.items() if p.poll() is None)
            stop(mine)
            for h in mine:
                del live[h]

        waited = wait_for_agents(live, deadline, watch=looking)
        stopped |= waited.stopped
    finally:
        stop(procs)  # an error or a signal: no agent outlives the wait
        for part, configs in zip(parts, groups, strict=True):
            _gather(network, configs, part.out.absolute())
    outcomes = []
    for part, configs in zip(parts, groups, strict=True):
        out = part.out.absolute()
        outcomes.append([_outcome(host, cfg.rank, out, procs[host].returncode,
                                  stopped.get(host)) for host, cfg in configs.items()])
        if part.transport == "rocev2":
            add_roce_spines(network, out, configs)
    return outcomes


def _spawn(network: Network, configs: dict[str, AgentConfig], out: Path, mode: str,
           processes: int | None, job_of: dict[str, int]) -> dict[str, Any]:
    """Each agent's config written where its machine keeps it, and the agents started: one
    process per host, or pooled (each process one job's hosts). Host -> its process."""
    procs: dict[str, Any] = {}
    for host, cfg in configs.items():
        config = f"{cfg.out_dir}/config.json"
        network.write_files(host, {config: cfg.to_json()} | (
            {f"{cfg.out_dir}/agent.log": ""} if mode == "pooled" else {}))
        if mode != "pooled":
            procs[host] = network.spawn(host, f"agent-{host}",
                                        agent_command("hostagent.runtime.agent", config),
                                        f"{cfg.out_dir}/agent.log", cwd=cfg.out_dir)
    return (_start_pooled(network, configs, out, processes, job_of) if mode == "pooled"
            else procs)


def _outcome(host: str, rank: int, out: Path, code: int | None,
             stopped: str | None) -> AgentOutcome:
    """What one agent reported (its result.json), or, when it wrote none, its exit status and
    the last line it logged; an agent the runner stopped says so (`stopped`: why)."""
    result_path = out / host / "result.json"
    if result_path.exists():
        result = json.loads(result_path.read_text())
    else:
        log_path = out / host / "agent.log"
        log = log_path.read_text()[-2000:] if log_path.exists() else ""
        if not log.strip():  # pooled: what the process itself said
            log = "".join(p.read_text()[-2000:] for p in out.glob("pool-*.log"))
        result = {"status": "failed", "error": f"no result (exit {code}):"
                                               f" {log.strip().splitlines()[-1:] or ''}"}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a") as f:  # the agent could not say why it stopped: we do
            f.write(f"runner: the agent ended with exit status {code} without a result"
                    + (f" (the runner stopped it: {stopped})" if stopped else "") + "\n")
    if stopped is not None:
        result["stopped_by_runner"] = stopped
        if result.get("status") != "failed":
            result |= {"status": "failed", "error": f"stopped: {stopped}"}
    return AgentOutcome(host, rank, code, result)


PATH_PROBES = 8  # datagrams sent to find the spine a RoCEv2 QP's 5-tuple hashes to


def roce_spine(network: Network, host: str, peer: str, plane: int, sport: int) -> int | None:
    """The spine a RoCEv2 flow (UDP from `sport` to port 4791) takes in `plane`, read from the
    counters: PATH_PROBES datagrams of the same 5-tuple, sent once the agents are done, and
    the one spine whose port facing the source leaf received them. (`ip route get` with the
    flow's ports is no substitute: on this kernel it names other next hops than forwarding
    takes.) None between hosts of one leaf (no spine), when no single spine saw them all, or
    when the host cannot send them (its port still down: a run whose QP failed on a port fault
    ends while the fault lasts)."""
    plan = network.plan
    leaf = plan.leaf_of(host, plane)
    if leaf == plan.leaf_of(peer, plane):
        return None
    facing = {sp: plan.port_to(sp, leaf).ifname for sp in plan.spines[plane]}
    before = {sp: network.rx_packets(sp, ifname) for sp, ifname in facing.items()}
    try:
        network.send_udp(host, str(plan.plain_address(host, plane)), sport,
                         str(plan.plain_address(peer, plane)), ROCE_PORT, PATH_PROBES)
    except OSError:  # ENETUNREACH: no route out of that port now
        return None
    deadline = time.time() + 1.0
    while True:
        moved = [sp for sp, ifname in facing.items()
                 if network.rx_packets(sp, ifname) - before[sp] >= PATH_PROBES]
        if moved or time.time() > deadline:
            break
        time.sleep(0.005)
    return plan.nodes[moved[0]].index if len(moved) == 1 else None


def add_roce_spines(network: Network, out: Path, configs: dict[str, AgentConfig]) -> None:
    """Write into each agent's paths.json (in the results) the spine each of its RoCEv2 QPs that
    sent data crossed (the agents know their plane and UDP source port, not the fabric's hash).
    One QP at a time, so that each probe burst is the only traffic the spines see. A QP that
    sent nothing has no spine: a ring uses 2 of a rank's peers, and probing all of ref-64's
    16,128 QPs took 50 s after the workload had ended."""
    for host, cfg in configs.items():
        path = out / host / "paths.json"
        if not path.exists():
            continue
        report = json.loads(path.read_text())
        peers = {p.rank: p.host for p in cfg.peers}
        for q in report.get("qps", []):
            if q.get("plane") is not None and q.get("sport") is not None and q.get("data_sent"):
                q["spine"] = roce_spine(network, host, peers[q["peer"]], q["plane"], q["sport"])
        path.write_text(json.dumps(report))
