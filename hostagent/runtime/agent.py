"""The program each emulated host runs: `python -m hostagent.runtime.agent CONFIG.json`.

It builds its QPs toward every peer (MRC or RoCEv2), waits for the common start time, runs the
workload's collective iterations with real buffers and verification, and writes into its
folder: `result.json` (how it ended; for a training step that did not end, the nodes it was
waiting in and on which ranks), `iterations.json`, `messages.json` and `paths.json`
(every EV's counters and state changes). Exit status 0 only if every iteration completed and
verified. It never hangs: a deadline from the runner bounds the whole run.

`host_main` is one host's whole life; `main` runs it alone in this process (the per-host mode),
hostagent/runtime/pooled.py runs many of them on one event loop (the pooled mode), each with its
sockets in its own namespace and its log lines in its own agent.log.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import os
import random
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hostagent import compiled
from hostagent.protocol.evs import EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.nic import Nic
from hostagent.protocol.qp import QueuePair
from hostagent.protocol.rocev2 import RoceQP, dcqcn
from hostagent.runtime import driver, netns
from hostagent.runtime.config import AgentConfig
from hostagent.runtime.ev_load import EV_LOAD, EvLoadRow, ev_load_document
from hostagent.runtime.file_wait import FILES
from hostagent.runtime.loop_lag import PROCESS_LAG, LagWindow
from hostagent.workloads.algorithms import Algorithm, Choice
from hostagent.workloads.collectives import DTYPE, Communicator
from hostagent.workloads.graph import RankPlan
from hostagent.workloads.iterations import IterationRecord, MessageRecord, run_iterations
from hostagent.workloads.steps import NodeRecord, StepExecutor, run_steps

log = logging.getLogger("hostagent")
T = TypeVar("T")
QPsByPeer = dict[int, list[tuple[QueuePair, driver.Route]]]  # peer rank -> its QPs, routes
ROCE_PORTS = range(10000, 60000)  # UDP source ports (RoCEv2 entropy) drawn from the seed


def roce_ports(seed: int, rank: int, count: int) -> list[int]:
    """Distinct UDP source ports for an agent's RoCEv2 QPs, drawn from the scenario seed: the
    fabric's ECMP hashes them, so the seed decides (reproducibly) which spine each QP takes."""
    return random.Random(seed * 1_000_003 + rank).sample(ROCE_PORTS, count)


WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="")  # "h3 rank 3": whose
# task runs (hostagent/runtime/pooled.py sends each host's log lines to its own file by it)


def build_qps(cfg: AgentConfig) -> tuple[socket.socket, QPsByPeer]:
    """The listening socket and, per peer rank, its QPs with their routes."""
    qp_cfg, policy = cfg.qp, cfg.mrc
    listen = driver.listen_socket()
    mrc_sock = driver.ecn_socket(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
    peers: QPsByPeer = {}
    empty = memoryview(bytearray(0))
    ports = iter(roce_ports(cfg.seed, cfg.rank, len(cfg.peers) * cfg.qps_per_peer))
    for peer in cfg.peers:
        entries = []
        for k in range(cfg.qps_per_peer):
            ours, theirs = driver.qpn(cfg.rank, peer.rank, k)
            seed = cfg.seed * 1_000_003 + cfg.rank * 1009 + peer.rank * 17 + k
            if cfg.transport == "mrc":
                evset = EVSet.build([(i, plane) for i, plane, _ in peer.evs], policy,
                                    random.Random(seed), denied=frozenset(peer.denied))
                qp: QueuePair = MrcQP(ours, theirs, empty, qp_cfg, evset, seed)
                route = driver.Route(mrc_sock, {i: (addr, driver.PORT)
                                                for i, _, addr in peer.evs},
                                     {i: plane for i, plane, _ in peer.evs})
            else:
                plane = k % len(cfg.plain)
                sock = driver.ecn_socket(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
                sock.bind((cfg.plain[plane], next(ports)))
                qp = RoceQP(ours, theirs, empty, qp_cfg, seed, cc=dcqcn(
                    qp_cfg, **(asdict(cfg.dcqcn) if cfg.dcqcn else {})))
                route = driver.Route(sock, {0: (peer.plain[plane], driver.PORT)}, {0: plane})
            entries.append((qp, route))
        peers[peer.rank] = entries
    return listen, peers


def path_report(peers: QPsByPeer, wall_offset: float) -> dict[str, list[dict[str, Any]]]:
    """Final EV and QP counters, and every EV state change on the wall clock (`wall_offset`:
    QPs keep time on the event loop's monotonic clock, the results on the agents' wall clock)."""
    out: dict[str, list[dict[str, Any]]] = {"evs": [], "transitions": [], "qps": []}
    for peer, entries in peers.items():
        for qp, route in entries:
            roce_plane = None if isinstance(qp, MrcQP) else route.planes[0]
            gave_up = qp.failure
            out["qps"].append({"peer": peer, "qpn": qp.qpn, "failed": qp.failed,
                               # when it gave up (wall clock), after how many timeouts, and
                               # how long its retries lasted
                               "failed_at": None if gave_up is None
                               else gave_up.at + wall_offset,
                               "failed_timeouts": None if gave_up is None else gave_up.timeouts,
                               "retry_budget_s": None if gave_up is None else gave_up.budget,
                               "cwnd": qp.cc.cwnd, "cc_decreases": qp.cc.decreases,
                               "cnps": getattr(qp.cc, "cnps", None),  # DCQCN's notifications
                               "plane": roce_plane,
                               "sport": None if roce_plane is None
                               else route.sock.getsockname()[1],
                               **asdict(qp.counters)})
            evset = qp.evset if isinstance(qp, MrcQP) else None
            if evset is None:
                continue
            for ev in evset.evs:
                out["evs"].append({"peer": peer, "qpn": qp.qpn, "ev": ev.index,
                                   "plane": ev.plane, "state": ev.state.value,
                                   "sent": ev.sent, "losses": ev.losses, "trims": ev.trims,
                                   "ecn": ev.ecn, "condemned": ev.condemned,
                                   "congestion_losses": ev.congestion_losses,
                                   "hot_swaps": ev.hot_swaps,
                                   "random_losses": ev.random_losses,
                                   "floor_holds": ev.floor_holds,
                                   "timeouts": ev.timeouts,
                                   "stall_timeouts": ev.stall_timeouts,
                                   "probes_sent": ev.probes_sent,
                                   "probes_answered": ev.probes_answered,
                                   "probe_rtts": ev.probe_rtts})
            for t in evset.transitions:
                out["transitions"].append({"peer": peer, "qpn": qp.qpn, "ev": t.ev,
                                           "time": t.time + wall_offset, "old": t.old.value,
                                           "new": t.new.value, "reason": t.reason})
    return out


async def wait_for_start(cfg: AgentConfig, out: Path) -> None:
    """Say we are ready (sockets bound), then wait for the runner's common start time: a peer
    that sends before another agent listens would lose packets and condemn healthy EVs."""
    (out / "ready").touch()
    start_file = Path(cfg.start_file)
    if not await FILES.get().until([start_file], cfg.timeout):
        raise TimeoutError(f"no start time in {start_file} after {cfg.timeout:.0f} s")
    await asyncio.sleep(max(0.0, float(start_file.read_text()) - time.time()))




PROGRESS_FILE = "progress"  # a line per iteration this host has completed, for the runner


def progress_count(text: str | None) -> int:
    """Iterations a host has completed, from its progress file's text (None: no file yet)."""
    return (text or "").count("\n")


class ProgressRecords(list[IterationRecord]):
    """Iteration records that also tell the runner how many have completed (its deadline
    follows the slowest rank's): a line appended to `path` at each. Appended, a reader sees a
    count that only grows and never a half-written one, and no file is renamed over another:
    ext4 writes such a file out at once (auto_da_alloc), 0.3-1 ms at every iteration's end of
    every host, with the event loop of its whole pooled process waiting."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        path.write_text("")

    def append(self, record: IterationRecord) -> None:
        super().append(record)
        with open(self.path, "a") as fh:
            fh.write("\n")


LINGER_MAX = 30.0  # s an agent waits for its peers to finish before it closes anyway


async def linger_until_peers_done(cfg: AgentConfig, out: Path) -> None:
    """Say we are done, then keep the event loop (and so the QPs: ACKs, NACKs, resends)
    running until every peer is done too. An agent that left at once would strand a peer
    whose last ACK from it was lost: the peer resends into a closed socket until its retry
    budget fails the QP (seen at 1% loss)."""
    (out / "done").touch()
    await FILES.get().until([out.parent / peer.host / "done" for peer in cfg.peers],
                      min(LINGER_MAX, cfg.timeout))


@dataclass
class _HostRun:
    """One host's run as it goes: what it records (filled as iterations complete: a timeout
    keeps those that did), the instruments timed from the common start, and how it ended."""

    records: list[IterationRecord]
    messages: list[MessageRecord] = field(default_factory=list)
    nodes: list[NodeRecord] = field(default_factory=list)  # a training step's (steps.json)
    ev_load: list[EvLoadRow] = field(default_factory=list)
    executor: StepExecutor | None = None  # a training step's; None: a looped collective
    cpu_at_start: tuple[float, float] | None = None
    window: LagWindow | None = None  # this host's share of the process's loop-lag monitor
    sampler: int | None = None  # this host's key in EV_LOAD
    status: str = "ok"
    error: str | None = None
    ran_to_end: bool = False  # every iteration ran (verified or not): peers may need our ACKs


async def run(cfg: AgentConfig, out: Path, ns: str | None = None) -> dict[str, Any]:
    """The workload of one host; `ns`: the network namespace its sockets are opened in (None:
    this thread's)."""
    listen, peers = netns.call_in(ns, build_qps, cfg)
    nic = Nic(len(cfg.plain), cfg.nic.rate_bps, cfg.nic.limit) if cfg.nic else None
    drv = driver.Driver(cfg.rank, cfg.world, listen, peers, gso=cfg.gso, nic=nic,
                        latency={peer.rank: peer.latency for peer in cfg.peers})
    host = _HostRun(ProgressRecords(out / PROGRESS_FILE))
    try:
        await _run_workload(cfg, out, drv, peers, host)
    finally:
        await _wind_down(cfg, out, drv, host)
    _write_records(cfg, out, host, peers, drv.wall_offset)
    return _result(cfg, host)


async def _run_workload(cfg: AgentConfig, out: Path, drv: driver.Driver, peers: QPsByPeer,
                        host: _HostRun) -> None:
    """From registering the workload to its last iteration, or to why it stopped short (a QP
    that failed, the deadline, the runner's SIGTERM): `host.status` and `host.error`."""
    try:
        # the buffer peers write into must exist before anyone may send: register, then ready
        workload, host.executor = _workload(cfg, drv, host.records, host.nodes, host.messages)
        await wait_for_start(cfg, out)
        # straggler windows count from the common start, as faults do
        if host.executor is not None:
            host.executor.origin = float(Path(cfg.start_file).read_text())
        _start_watching(cfg, drv, peers, host)
        await asyncio.wait_for(workload(), cfg.timeout)
        host.ran_to_end = True
        wrong = [r for r in host.records if not r.verified]
        if wrong:
            host.status, host.error = ("failed", f"{len(wrong)} iterations with a wrong "
                                       f"result: {wrong[0].error}")
    except driver.TransportFailed as exc:
        host.status, host.error = "failed", f"transport failed: {exc}"
    except (asyncio.TimeoutError, TimeoutError) as exc:
        host.status, host.error = "failed", str(exc) or f"no completion within {cfg.timeout:.0f} s"
    except asyncio.CancelledError:  # SIGTERM from the runner (stop_on_signal): keep what is done
        host.status, host.error = "stopped", "stopped by the runner (SIGTERM)"


def _start_watching(cfg: AgentConfig, drv: driver.Driver, peers: QPsByPeer,
                    host: _HostRun) -> None:
    """The CPU, the loop lag and the EVs' load, from the common start: the workload's, not the
    agent's start-up."""
    host.cpu_at_start = _cpu_times()
    host.window = PROCESS_LAG.get().start()
    if cfg.ev_sample_period:
        host.sampler = EV_LOAD.get().start(peers, cfg.ev_sample_period, drv.wall_offset,
                                           host.ev_load)


async def _wind_down(cfg: AgentConfig, out: Path, drv: driver.Driver, host: _HostRun) -> None:
    """Stop the instruments, wait for the peers if this host ran every iteration, close the
    sockets. Only such a host waits: one whose collective failed (a QP failed, its time ran
    out) leaves none of them anything to complete; it reports at once, so that the runner ends
    the run (pooled: by this host's result.json; it had waited here LINGER_MAX for peers that
    could never be done)."""
    if host.sampler is not None:
        EV_LOAD.get().stop(host.sampler)
    if host.window is not None:
        host.window.close()
    if host.ran_to_end:
        try:
            await linger_until_peers_done(cfg, out)
        except asyncio.CancelledError:  # stopped by the runner while lingering: what
            pass  # this host did and how it ended stand, and are written after
    drv.close()


def _write_records(cfg: AgentConfig, out: Path, host: _HostRun, peers: QPsByPeer,
                   wall_offset: float) -> None:
    """The host's records into its folder, for the runner's tables."""
    (out / "iterations.json").write_text(_rows(host.records))
    if cfg.workload.steps is not None:
        (out / "steps.json").write_text(_rows(host.nodes))
    if cfg.ev_sample_period:
        (out / "ev_load.json").write_text(json.dumps(ev_load_document(host.ev_load)))
    (out / "messages.json").write_text(_rows(host.messages))
    (out / "loop_lag.json").write_text(json.dumps(host.window.samples() if host.window else []))
    (out / "paths.json").write_text(json.dumps(path_report(peers, wall_offset), default=float))


def _result(cfg: AgentConfig, host: _HostRun) -> dict[str, Any]:
    """How the host ended, for result.json; a step that never ended says what it waited in."""
    records, cpu = host.records, host.cpu_at_start
    result: dict[str, Any] = {
        "status": host.status, "error": host.error, "host": cfg.host, "rank": cfg.rank,
        "transport": cfg.transport, "iterations": len(records),
        "verified": bool(records) and all(r.verified for r in records),
        "cpu_start_s": None if cpu is None else sum(cpu),
        "cpu_start": None if cpu is None else {"user_s": cpu[0], "system_s": cpu[1]},
        "loop_lag": host.window.summary() if host.window else {}}
    if host.executor is not None and not host.ran_to_end:
        result["waiting"] = waits = host.executor.waiting()
        for wait in waits:
            log.error("waiting in iteration %d, node %d (%s), a %s, on ranks %s",
                      wait["iteration"], wait["node"], wait["name"], wait["kind"], wait["on"])
    return result


def _workload(cfg: AgentConfig, drv: driver.Driver, records: list[IterationRecord],
              nodes: list[NodeRecord], messages: list[MessageRecord]
              ) -> tuple[Callable[[], Awaitable[object]], StepExecutor | None]:
    """This rank's workload, ready to start, filling `records`, `nodes` and `messages` as it
    goes: the training step's executor over its plan, or the looped collective."""
    w = cfg.workload
    if w.steps is not None:
        executor = StepExecutor(drv, RankPlan.from_dict(w.steps), seed=cfg.seed,
                                clock=time.time, compute_scale=w.compute_scale,
                                jitter=w.compute_jitter, stragglers=w.stragglers,
                                algorithm=w.algorithm, fabric=w.cost_fabric())
        return functools.partial(run_steps, executor, w.iterations, w.warmup, records, nodes,
                                 messages), executor
    return functools.partial(
        run_iterations, drv, w.collective, w.size, w.iterations, w.warmup, w.compute_gap,
        cfg.seed, time.time,
        comm=Communicator(drv, w.size // DTYPE.itemsize, trees=w.algorithm == "tree"),
        messages=messages, records=records, algorithm=_looped(w.algorithm)), None


def _looped(algorithm: Choice | None) -> Algorithm | None:
    """The looped collective's algorithm, which the run chose before the agents started."""
    if algorithm == "auto":
        raise ValueError("the looped collective's algorithm arrives chosen, not auto")
    return algorithm


def _rows(records: Sequence[IterationRecord | NodeRecord | MessageRecord]) -> str:
    """Flat records as a JSON list of objects, their fields as they are: vars(), not asdict,
    which copies each record deeply (9 us a record; a pooled process of 32 hosts writes
    thousands, inside the CPU its agents are measured by)."""
    return json.dumps([vars(r) for r in records])


async def host_main(cfg: AgentConfig, ns: str | None = None) -> dict[str, Any]:
    """One host from start to result.json; never raises (what went wrong is in the result)."""
    WHO.set(f"{cfg.host} rank {cfg.rank}")
    out = Path(cfg.out_dir)
    try:
        result = await run(cfg, out, ns)
    except Exception as exc:  # reported to the runner, with the traceback logged
        log.exception("agent failed")
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                  "host": cfg.host, "rank": cfg.rank, "transport": cfg.transport}
    user, system = _cpu_times()  # pooled: one pid, many hosts
    result |= {"cpu_s": user + system, "cpu": {"user_s": user, "system_s": system},
               "pid": os.getpid(), "protocol": compiled.BUILD}  # the build this process runs
    result["io"] = driver.io_stats()  # the process's, as well
    (out / "result.json").write_text(json.dumps(result))
    log.info("%s%s", result["status"], f": {result['error']}" if result.get("error") else "")
    return result


def _cpu_times() -> tuple[float, float]:
    """User and system CPU time of this whole process so far: with many hosts in one process,
    theirs together. Apart, since the user part is the agent's own code and the system part the
    kernel carrying its packets (bench/scale.py compares them)."""
    t = os.times()
    return t.user, t.system


async def stop_on_signal(work: Awaitable[T]) -> T:
    """Run `work`; a SIGTERM (the runner ending the workload: a peer crashed, or the deadline)
    cancels it, so it writes what completed and says why it stopped instead of dying mid-way."""
    task = asyncio.ensure_future(work)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await task


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m hostagent.runtime.agent CONFIG.json", file=sys.stderr)
        return 2
    cfg = AgentConfig.load(Path(args[0]))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {cfg.host} rank {cfg.rank}: %(message)s")
    result = asyncio.run(stop_on_signal(host_main(cfg)))
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
