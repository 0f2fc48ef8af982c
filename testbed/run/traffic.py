"""Running the workload on a built fabric: one agent per rank, started together, collected.

The runner writes each agent's config (hostagent/config.py), starts the agent inside its
host's namespace through Mininet, gives every agent the same wall-clock start time (namespaces
share the clock), waits for all of them with a deadline, and reads what each wrote. An agent
that fails is reported with its own error; nothing waits forever, and a crashed agent ends the
wait promptly (waiting.py), what completed being kept.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hostagent.config import AgentConfig, PeerConfig
from hostagent.nic import FRAME_OVERHEAD
from hostagent.wire import HEADER_SIZE
from testbed.emulation.network import FabricNetwork
from testbed.emulation.telemetry import default_period
from testbed.errors import TestbedError
from testbed.fabric import paths
from testbed.fabric.plan import FabricPlan
from testbed.lifecycle import interrupts
from testbed.run.waiting import stop, wait_for_agents
from testbed.scenario import Scenario

START_DELAY = 0.2  # seconds between the last agent being ready and the common start
READY_TIMEOUT = 60.0  # seconds for every agent to start Python and bind its sockets


def agent_configs(plan: FabricPlan, scenario: Scenario, transport: str,
                  out: Path) -> dict[str, AgentConfig]:
    """Pure: every rank's config; EV i toward a peer is the same (plane, spine) both ways."""
    hosts = scenario.rank_hosts()
    q, m, w = scenario.qp, scenario.mrc, scenario.workload
    qp = {"mss": q.mss, "init_cwnd": q.init_window, "max_cwnd": q.max_window,
          "base_rto": scenario.base_rto(), "target_delay": scenario.target_delay(),
          "linear_retries": q.linear_retries,
          "retry_budget": q.retry_budget, "ack_every": q.ack_every}
    mrc = {"active_per_plane": m.evs_per_plane, "ev_min_active": m.ev_min_active,
           "spray": m.spray, "probe_interval": m.probe_interval,
           "congestion_holdoff": m.congestion_holdoff, "hot_ratio": m.hot_ratio,
           "hot_rtts": m.hot_rtts}
    workload = {"collective": w.collective, "size": w.size, "iterations": w.iterations,
                "warmup": w.warmup, "compute_gap": w.compute_gap}
    configs = {}
    for rank, host in enumerate(hosts):
        peers = []
        for r, peer in enumerate(hosts):
            if peer == host:
                continue
            evs = paths.evs(plan, host, peer)
            peers.append(PeerConfig(
                r, peer, [(i, e.plane, str(e.address)) for i, e in enumerate(evs)],
                [str(plan.plain_address(peer, p)) for p in range(plan.planes)],
                [i for i, e in enumerate(evs) if _denied(e, m.denied)]))
        configs[host] = AgentConfig(
            rank, len(hosts), host, transport,
            [str(plan.plain_address(host, p)) for p in range(plan.planes)], peers,
            q.qps_per_peer.get(transport, 1), qp, mrc, workload, scenario.seed,
            str(out / "start"), str(out / host), timeout=deadline_for(scenario), gso=q.gso,
            nic=nic_limits(scenario), ev_sample_period=ev_sample_period(
                scenario, transport, sum(len(p.evs) for p in peers), len(plan.nodes)))
    return configs


MAX_SAMPLED_EVS = 256  # per agent: beyond, the load over time costs the agents too much CPU


def ev_sample_period(scenario: Scenario, transport: str, evs: int, nodes: int) -> float | None:
    """How often an MRC agent records each EV's load (the telemetry period), or None where it
    has more EVs than it can sample cheaply (ref-64: about 1,000 each): then only the final
    counters (paths.parquet) exist."""
    if transport != "mrc" or evs * scenario.qp.qps_per_peer.get("mrc", 1) > MAX_SAMPLED_EVS:
        return None
    return scenario.telemetry.period or default_period(nodes)


def _denied(ev: paths.EV, denied) -> bool:
    """A same-leaf EV crosses no spine: only a whole-plane denial removes it."""
    return any(d.plane == ev.plane and (d.spine is None or d.spine == ev.spine) for d in denied)


def nic_limits(scenario: Scenario) -> dict:
    """How much a host port may have queued before its QPs wait (hostagent/nic.py): a few
    packets, or 4 ms of the line (the agents' timers are about a millisecond coarse, and the
    port must not run dry between two wake-ups), within half the port's buffer."""
    link = scenario.fabric.host_link
    packet = scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD
    limit = min(link.buffer // 2, max(4 * packet, link.rate // 8 * 4 // 1000))
    return {"rate_bps": link.rate, "limit": limit}


def deadline_for(scenario: Scenario) -> float:
    """Seconds the whole workload may take before it counts as hung: generous (every byte at a
    tenth of the host link rate, plus every iteration's gap, plus a QP's full retry budget)."""
    w, f = scenario.workload, scenario.fabric
    per_iter = 4 * w.size * 8 / (f.host_link.rate * 0.1) + w.compute_gap
    rto = scenario.base_rto() * scenario.qp.retry_budget * 2 ** 6
    return 30.0 + (w.iterations + w.warmup) * per_iter + rto


def _start_together(out: Path, configs: dict[str, AgentConfig],
                    procs: dict[str, subprocess.Popen]) -> float:
    """Wait until every agent has bound its sockets, then publish one start time to all."""
    deadline = time.time() + READY_TIMEOUT
    while not all((Path(c.out_dir) / "ready").exists() for c in configs.values()):
        interrupts.checkpoint()
        dead = [h for h, p in procs.items() if p.poll() is not None]
        if dead or time.time() > deadline:
            why = (f"the agent of {dead[0]} exited before it was ready" if dead else
                   f"agents not ready after {READY_TIMEOUT:.0f} s")
            raise TestbedError(why, f"see {out}/<host>/agent.log")
        time.sleep(0.01)
    start_at = time.time() + START_DELAY
    tmp = out / "start.tmp"
    tmp.write_text(repr(start_at))
    tmp.replace(out / "start")
    return start_at


@dataclass
class AgentOutcome:
    host: str
    rank: int
    returncode: int | None
    result: dict  # the agent's result.json, or {"status": "failed", "error": ...}


def run_agents(network: FabricNetwork, scenario: Scenario, transport: str, out: Path,
               on_start: Callable[[float], None] | None = None) -> list[AgentOutcome]:
    """Start every rank's agent, wait for all, return what each reported. `on_start` gets the
    common start time (wall clock) as soon as it is set: the fault timeline counts from it."""
    out.mkdir(parents=True, exist_ok=True)
    configs = agent_configs(network.plan, scenario, transport, out)
    procs: dict[str, subprocess.Popen] = {}
    try:
        for host, cfg in configs.items():
            Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
            cfg_path = Path(cfg.out_dir) / "config.json"
            cfg.dump(cfg_path)
            log = open(Path(cfg.out_dir) / "agent.log", "w")
            procs[host] = network.node(host).popen(
                [sys.executable, "-m", "hostagent.agent", str(cfg_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
        start_at = _start_together(out, configs, procs)
        if on_start is not None:
            on_start(start_at)
        waited = wait_for_agents(procs, time.time() + deadline_for(scenario) + 10)
    finally:
        stop(procs)  # an error or a signal: no agent outlives the wait
    outcomes = []
    for host, cfg in configs.items():
        result_path = Path(cfg.out_dir) / "result.json"
        if result_path.exists():
            result = json.loads(result_path.read_text())
        else:
            log_path = Path(cfg.out_dir) / "agent.log"
            log = log_path.read_text()[-2000:]
            code = procs[host].returncode
            result = {"status": "failed", "error": f"no result (exit {code}):"
                                                   f" {log.strip().splitlines()[-1:] or ''}"}
            why = waited.stopped.get(host)
            with log_path.open("a") as f:  # the agent could not say why it stopped: we do
                f.write(f"runner: the agent ended with exit status {code} without a result"
                        + (f" (the runner stopped it: {why})" if why else "") + "\n")
        if host in waited.stopped:
            result["stopped_by_runner"] = waited.stopped[host]
            if result.get("status") != "failed":
                result |= {"status": "failed", "error": f"stopped: {waited.stopped[host]}"}
        outcomes.append(AgentOutcome(host, cfg.rank, procs[host].returncode, result))
    return outcomes
