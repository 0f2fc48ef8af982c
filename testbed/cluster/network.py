"""The fabric spread over servers: Mininet's cluster mode, with VXLAN links between servers.

A sibling of the single-machine `FabricNetwork` (both implement `network_api.Network` on
the shared base of shells.py), with Mininet's cluster edition's split (`examples/cluster.py`:
`RemoteMixin` nodes, `RemoteLink` tunnels, a placer):
- each node's shell starts on its server (`placement.server_of`), through the server's command
  prefix: `ssh root@server` as RemoteMixin does, or a plain namespace switch for fast tests;
- one server agent per server, started over ssh (testbed/cluster/server_agent.py, its
  session in client.py), does everything after the shells, on its own server: sysctls; the
  links (a veth when both ends share the server, else one VXLAN device per end, one VNI per
  link, bound to the server's underlay address); addresses, routes, End SIDs, htb and the eBPF
  queue (loaded once per server); EV probes from the hosts on it, End SID counters, telemetry,
  faults (nftables, shaper rates, delays, routing convergence), link state, queue rates; and,
  when its session ends for any reason, the removal of its nodes. The build, verification,
  telemetry and faults never reach into a node from here;
- the servers come first and go last; their clocks and underlay are measured through the
  agents before the fabric is built.

The fault injector's nftables workers run in the agents too (client_nft.py), on the server's
clock shifted by its measured offset. So do the processes of the workload: the host agents,
background iperf3 flows and captures are spawned by the agent of their node's server, in its
folder there (`node_path`), followed through it, and their outputs gathered back into the
results (`fetch`); the fidelity monitor runs on every server (`start_monitor`).

Servers are real (`cluster.servers`, reached over ssh) or emulated on this machine
(testbed/cluster/emulated_servers.py), both through the same agents and the same ssh
sessions.
"""
from __future__ import annotations

import shutil
import threading
import time
from ipaddress import IPv6Address, IPv6Network
from pathlib import Path
from typing import Any

from testbed.cluster import ops
from testbed.cluster.client import (
    RemoteProcess,
    ServerError,
    ServerProcesses,
    ServerSession,
    agent_argv,
    ask_all,
    fetch,
    remote_command,
)
from testbed.cluster.client_nft import NftPoller, RemoteNft
from testbed.cluster.emulated_servers import (
    EmulatedServers,
    RealServers,
    UnderlayPath,
    require_tools,
)
from testbed.emulation.cpu import CpuSampler, boot_id
from testbed.emulation.machine_monitor import CPU_PERIOD, Machine
from testbed.emulation.network import NetlinkVeth, fifo_limit
from testbed.emulation.port_counters import PortSample
from testbed.emulation.probes import WINDOW, ProbeJob, ProbeOutcome, arrived
from testbed.emulation.shells import MininetFabric
from testbed.errors import EnvironmentProblem, TestbedError
from testbed.fabric.clock import ClockOffset, bound_ns
from testbed.fabric.placement import Placement, place
from testbed.fabric.plan import FabricPlan, Link, Port
from testbed.fabric.timers import timers
from testbed.kernel import vxlan
from testbed.lifecycle import cleanup, interrupts
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import STATE_DIR, RunRegistry
from testbed.scenario.cluster import Cluster


def preflight(cluster: Cluster) -> None:
    """What this machine needs before servers are made or reached (each server's own needs
    are checked by its agent, `preflight`); the underlay is measured after."""
    if cluster.emulated is None:
        if shutil.which("ssh") is None:
            raise EnvironmentProblem("real servers are reached over ssh, which is not "
                                     "installed here", "install openssh-client")
        return
    require_tools()
    missing = vxlan.probe()
    if missing:
        raise EnvironmentProblem(f"cluster links need VXLAN: {missing}",
                                 "load the vxlan module (`modprobe vxlan`)")


class ServerLink(NetlinkVeth):
    """Mininet's RemoteLink, made by the servers' agents: Mininet keeps the link and its two
    interfaces (the CLI, `net.links`), the devices are made on the servers (`op_links`: a veth
    when both ends share a server, else one VXLAN device per end, each on its own server)."""

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None,
                     node2=None, deleteIntfs=True, **_kw):  # Mininet's name
        return None


class ClusterNetwork(MininetFabric):
    """Build with `build()` (its `prepare` phase makes and reaches the servers); `close()`
    ends the servers too.

    Everything done to a node after its shell started goes through its server's agent, over
    ssh (testbed/cluster/server_agent.py): sysctls, links, configuration, EV probes, End
    SID counters, telemetry, link state and queue rates. This process never opens a socket in a
    node's namespace nor reads its /proc entries."""

    def __init__(self, plan: FabricPlan, registry: RunRegistry, progress: Progress) -> None:
        super().__init__(plan, registry, progress)
        cluster = plan.scenario.cluster
        assert cluster is not None
        self.cluster = cluster
        self.placement: Placement = place(plan, cluster)
        self.agent_dir = STATE_DIR / f"{registry.path.stem}.agents"
        self.servers: EmulatedServers | RealServers = (
            EmulatedServers(cluster, plan.scenario.fabric.mtu, registry, self.agent_dir)
            if cluster.emulated is not None else RealServers(cluster, plan.scenario.fabric.mtu))
        self.underlay: list[UnderlayPath] = []
        self.sessions: dict[str, ServerSession] = {}
        self.processes: dict[str, ServerProcesses] = {}
        self.clocks: dict[str, ClockOffset] = {}
        self.clock_bound_ns = bound_ns(min(timers(plan.scenario, t).timeout
                                           for t in plan.scenario.transport))
        self.agent_logs: dict[str, str] = {}
        self._started: dict[str, dict[str, int]] = {}  # server -> node -> pid of its shell
        self.nft_poller: NftPoller | None = None
        self._own_cpu: CpuSampler | None = None  # this process's CPU while monitoring

    def facts(self) -> dict:
        """The cluster as meta.json records it: servers, placement, tunnels, the underlay, the
        servers' clocks against the runner's."""
        pl = self.placement
        return {
            "servers": {s: {"underlay": pl.underlay[s],
                            "namespace": self.servers.netns.get(s),
                            "nodes": list(pl.nodes_on(s)),
                            "agent_pid": self.sessions[s].hello.get("pid")
                            if s in self.sessions else None,
                            "host": self.sessions[s].hello.get("host")
                            if s in self.sessions else None,
                            "cores": self.sessions[s].hello.get("cores")
                            if s in self.sessions else None} for s in pl.servers},
            "emulated": self.servers.emulated, "placement": pl.policy,
            "node_start": "ssh" if self.cluster.ssh_transport or not self.servers.emulated
            else "nsenter",
            "server_agents": "ssh",
            "underlay_mtu": min((p.mtu for p in self.underlay), default=self.servers.mtu),
            "required_mtu": self.servers.required_mtu,
            "crossing_links": {link.name: {"vni": pl.vni[link.name], "rate": link.rate}
                               for link in pl.crossing},
            "pairs": [{"servers": list(p.servers), "links": len(p.links), "rate": p.rate,
                       "underlay_rate": p.underlay_rate} for p in pl.pairs],
            "underlay_rtt_ms": {f"{p.src}->{p.dst}": p.rtt_ms for p in self.underlay},
            "clock": {"bound_us": self.clock_bound_ns / 1e3,
                      "servers": {s: c.to_json() for s, c in self.clocks.items()},
                      "corrected": False,
                      "why_not_corrected": "the host agents run on their servers and stamp "
                                           "times with their server's clock, each within the "
                                           "bound of this one; the common start time is "
                                           "shifted by each server's offset, the agents' "
                                           "timestamps are not"},
        }

    # ---- the servers ----
    def prepare(self, progress: Progress) -> None:
        with progress.phase("servers") as info:
            info["done"] = self.add_servers()

    def add_servers(self) -> str:
        """Make the emulated servers, start one agent on each over ssh, measure their clocks
        and their underlay; a summary line."""
        self.registry.add_dir(self.agent_dir)
        if self.servers.emulated:
            self.agent_dir.mkdir(mode=0o700, exist_ok=True)  # each server's private mount
        self.servers.create()
        for name in self.servers.names:
            ssh = self.servers.ssh(name)
            self.registry.add_server(name, remote_command(
                ssh, agent_argv("--clean", str(self.agent_dir), name)))
            session = ServerSession(name, ssh, self._agent_log(name))
            self.sessions[name] = session
            session.start()
            self.processes[name] = ServerProcesses(session)
        missing = ask_all(self.sessions.values(), ops.Preflight())
        for name, lacks in missing.items():
            if lacks:
                raise EnvironmentProblem(
                    f"server {name} lacks {'; '.join(lacks)}",
                    "run scripts/install.sh on it (Mininet, iproute2, ethtool, iperf3, "
                    "tcpdump, nftables, the eBPF programs built)")
        scenario = self.plan.scenario.model_dump(mode="json")
        ask_all(self.sessions.values(), {s: ops.Plan(run=self.registry.path.stem,
                                                     scenario=scenario, server=s)
                                         for s in self.sessions})
        self._check_clocks()
        self.underlay = self._check_underlay()
        worst = max(p.rtt_ms for p in self.underlay)
        offset = max(c.worst_ns() for c in self.clocks.values())
        kind = ("emulated servers (namespace + sshd + agent over ssh)" if self.servers.emulated
                else "servers (agent over ssh)")
        return (f"{len(self.servers.names)} {kind}, underlay MTU >= "
                f"{min(p.mtu for p in self.underlay)} carries a {self.servers.required_mtu} B "
                f"tunnel packet unfragmented between every pair, RTT <= {worst:.3f} ms, clocks "
                f"within {offset / 1e3:.0f} us of this one")

    def _agent_log(self, server: str) -> str:
        """The agent's log on its server, in the run's own folder beside the registry (the
        agent makes it, and removes its log and the emptied folder when it exits; here the
        folder is recorded first, so that `clean` removes it after a crash too)."""
        return str(self.agent_dir / f"{server}.log")

    def _check_clocks(self) -> None:
        """Each server's clock against this one; refuse to run when one is off by more than
        the bound (its offset's error included: a measurement too coarse to tell is refused
        too)."""
        for name, session in self.sessions.items():
            self.clocks[name] = session.clock()
        off = {n: c for n, c in self.clocks.items() if c.worst_ns() > self.clock_bound_ns}
        if off:
            worst = max(off, key=lambda n: off[n].worst_ns())
            c = off[worst]
            raise EnvironmentProblem(
                f"the clock of server {worst} is {c.offset_ns / 1e3:+.0f} us from this "
                f"machine's (+-{c.error_ns / 1e3:.0f} us, RTT {c.rtt_ns / 1e3:.0f} us); a run "
                f"needs every server within {self.clock_bound_ns / 1e3:.0f} us (a tenth of the "
                f"ACK timeout, at most 1 ms)",
                "synchronise the servers' clocks (chrony against one local server, or PTP: "
                "`chronyc tracking` should show an offset of tens of microseconds)")

    def _check_underlay(self) -> list[UnderlayPath]:
        """Preflight of the underlay, done by the agents: every server's underlay device
        carries a full fabric frame in VXLAN, and a packet of exactly that size crosses to
        every other server unfragmented (DF set). EnvironmentProblem with the number to set."""
        required = self.servers.required_mtu
        address = self.placement.underlay
        size = required - 20 - 8  # ICMP payload of an IPv4 packet of that size
        found = ask_all(self.sessions.values(), {
            s: ops.Underlay(address=address[s], size=size,
                            peers={p: address[p] for p in self.servers.names if p != s})
            for s in self.servers.names})
        for name, got in found.items():
            if got["mtu"] < required:
                raise EnvironmentProblem(
                    f"the underlay of server {name} has MTU {got['mtu']}: a fabric frame of MTU "
                    f"{self.servers.fabric_mtu} in VXLAN needs {required} "
                    f"({self.cluster.overhead} B of outer headers)",
                    f"raise the underlay MTU to at least {required} (cluster.underlay_mtu), "
                    f"or lower fabric.mtu to {got['mtu'] - self.cluster.overhead}")
        paths = []
        for src, got in found.items():
            for dst, rtt in got["rtt_ms"].items():
                if rtt is None:
                    raise EnvironmentProblem(
                        f"a {required} B packet (a full fabric frame in VXLAN) did not cross "
                        f"the underlay from {src} to {dst} unfragmented",
                        f"every device between the servers needs MTU >= {required}")
                paths.append(UnderlayPath(src, dst, got["mtu"], rtt))
        return paths

    def underlay_counters(self) -> dict[str, tuple[int, ...]]:
        """Per server, its underlay device's counters (/proc/net/dev order), read by its agent."""
        got = ask_all(self.sessions.values(), {
            s: ops.Underlay(address=self.placement.underlay[s]) for s in self.sessions})
        return {s: tuple(g["counters"]) for s, g in got.items()}

    # ---- the build ----
    def node_params(self, name: str) -> dict[str, object]:
        server = self.placement.server_of[name]
        prefix = (self.servers.ssh(server, tty=True) if self.cluster.ssh_transport
                  else self.servers.prefix(server))
        return {"shell_prefix": prefix, "server": server}

    def add_nodes(self) -> None:
        """The shells (each recorded here by its local process: the ssh or nsenter that
        started it), then each server's agent takes its nodes on, recording them on its server
        (what `clean` ends there over ssh should the run die)."""
        super().add_nodes()
        ask_all(self.sessions.values(), {
            s: ops.Nodes(pids=self._started.get(s, {})) for s in self.sessions})

    def node_started(self, name: str) -> None:
        """Noted, for its server's agent (which checks it, notes its namespace, sets sysctls)."""
        server = self.placement.server_of[name]
        self._started.setdefault(server, {})[name] = self.net[name].pid

    def add_links(self) -> str:
        mtu = self.plan.scenario.fabric.mtu
        for link in self.progress.bar(self.plan.links, len(self.plan.links), "links"):
            a, b = link.lower, link.upper
            self.net.addLink(self.net[a.node], self.net[b.node], cls=ServerLink,
                             rtnl=None, mtu=mtu, ports=(a, b),
                             intfName1=a.ifname, intfName2=b.ifname)
        ask_all(self.sessions.values(), ops.Links())
        crossing = len(self.placement.crossing)
        return (f"{len(self.plan.links) - crossing} veth links, {crossing} VXLAN links "
                "between servers")

    def configure(self) -> None:
        """`FabricNetwork.configure`, each server's agent doing its own nodes (its cores, its
        copy of the eBPF program), all servers at once."""
        links = self.plan.link_by_ports
        fifo = {s: {f"{n}/{p.ifname}": self.fifo_limit(p, links[(n, p.ifname)])
                    for n in self.placement.nodes_on(s) for p in self.plan.ports(n)}
                for s in self.sessions}
        got = ask_all(self.sessions.values(),
                      {s: ops.Configure(fifo=f) for s, f in fifo.items()})
        for ifindexes in got.values():
            self.ifindex.update(ifindexes)

    def fifo_limit(self, port: Port, link: Link) -> int:
        """As on one machine; the program runs on the servers, not here."""
        return fifo_limit(self.plan, port, link)

    # ---- what runs through the agents ----
    def session_of(self, node: str) -> ServerSession:
        return self.sessions[self.placement.server_of[node]]

    def end_sid_counters(self, progress: Progress) -> dict[tuple[str, IPv6Network], int]:
        """Packets through every router's End SIDs, each server reading its own routers."""
        out: dict[tuple[str, IPv6Network], int] = {}
        for routers in ask_all(self.sessions.values(), ops.EndSids()).values():
            for router, sids in routers.items():
                out.update({(router, IPv6Network(sid)): n for sid, n in sids.items()})
        return out

    def probe_evs(self, job: ProbeJob, progress: Progress) -> ProbeOutcome:
        """Every EV probed by the agent of its source's server; every server reports what
        its hosts received; judged here as on one machine. Lost probes are resent for
        `job.retries` more rounds."""
        nonce = int(time.monotonic_ns() & 0xFFFFFFFF)
        out = ProbeOutcome()
        rate = min(link.rate for link in self.plan.links)
        pause = WINDOW * 128 * 8 / rate  # a window of probes (<= 128 B each) at the slowest link
        ask_all(self.sessions.values(), ops.ProbeOpen(nonce=nonce))
        try:
            pending = list(range(len(job.evs)))
            for _round in range(job.retries + 1):
                share: dict[str, list[ops.Probe]] = {s: [] for s in self.sessions}
                for i in pending:
                    ev = job.evs[i]
                    share[self.placement.server_of[ev.src]].append((i, ev.src, str(ev.address)))
                    out.sent[i] += 1
                ask_all(self.sessions.values(), {
                    s: ops.ProbeSend(probes=p, window=WINDOW, pause=pause)
                    for s, p in share.items()})
                deadline = time.monotonic() + job.timeout
                while True:
                    interrupts.checkpoint()
                    got = ask_all(self.sessions.values(), ops.ProbeCollect())
                    for arrivals in got.values():
                        for index, host, address, ifindex in arrivals["arrivals"]:
                            arrived(job, out, index, host,
                                    IPv6Address(address) if address else None, ifindex)
                    if all(i in out.seen for i in pending) or time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
                pending = [i for i in pending if i not in out.seen]
                if not pending:
                    break
        finally:
            ask_all(self.sessions.values(), ops.ProbeClose())
        return out

    def sample_ports(self, queues: bool) -> dict[str, dict[str, PortSample]]:
        """Every node's port counters, each server's agent reading its own (telemetry), their
        read times in this machine's clock."""
        out: dict[str, dict[str, PortSample]] = {}
        for got in ask_all(self.sessions.values(), ops.Sample(queues=queues)).values():
            for node, ports in got["nodes"].items():
                shift = self.clock_offset(node)
                out[node] = {ifname: [*sample[:4], sample[4] - shift]
                             for ifname, sample in ports.items()}
        return out

    def nft_worker(self, node: str, stop: threading.Event, setup: str) -> RemoteNft:
        """The node's nftables worker, in its server's agent (fault times in the server's
        clock, by its measured offset)."""
        if self.nft_poller is None:
            self.nft_poller = NftPoller(self.sessions, {
                s: c.offset_ns / 1e9 for s, c in self.clocks.items()})
        return RemoteNft(node, self.placement.server_of[node], self.nft_poller, stop, setup)

    def rx_packets(self, node: str, ifname: str) -> int:
        return self.session_of(node).request(ops.RxPackets(node=node, ifname=ifname))["packets"]

    def send_udp(self, host: str, src: str, sport: int, dst: str, dport: int,
                 count: int) -> None:
        self.session_of(host).request(ops.SendUdp(node=host, src=src, sport=sport, dst=dst,
                                                  dport=dport, count=count))

    # ---- the netlink part of faults, by the node's server ----
    def set_routes(self, node: str, delete: list[str],
                   replace: list[tuple[str, list[tuple[str, str]]]]) -> None:
        self.session_of(node).request(ops.Routes(node=node, delete=delete, replace=replace))

    def set_port_rate(self, port: Port, link: Link, rate_bps: int) -> None:
        self.session_of(port.node).request(ops.PortRate(node=port.node, ifname=port.ifname,
                                                        rate=rate_bps))
        self.set_queue_rate(port, link, rate_bps)

    def set_port_delay(self, port: Port, link: Link, delay_s: float | None) -> None:
        self.session_of(port.node).request(ops.PortDelay(
            node=port.node, ifname=port.ifname, limit=self.fifo_limit(port, link),
            delay=delay_s))

    # ---- processes and files on the servers ----
    def node_path(self, node: str, local: Path) -> str:
        """The file the run keeps at `local` is written in the agent's folder on the node's
        server, at the same place relative to it as `local` is to the results."""
        assert self.results_dir is not None
        work = self.session_of(node).hello["work"]
        return f"{work}/{local.absolute().relative_to(self.results_dir.absolute())}"

    def write_files(self, node: str, texts: dict[str, str]) -> None:
        self.session_of(node).request(ops.Write(files=texts))

    def spawn(self, node: str, key: str, argv: list[str], stdout: str,
              cwd: str | None = None) -> RemoteProcess:
        server = self.placement.server_of[node]
        pid = self.sessions[server].request(ops.Spawn(node=node, key=key, argv=argv,
                                                      stdout=stdout, cwd=cwd))["pid"]
        return RemoteProcess(self.processes[server], key, pid)

    def read_files(self, wanted: list[tuple[str, str]]) -> dict[str, str | None]:
        share: dict[str, list[str]] = {}
        for node, path in wanted:
            share.setdefault(self.placement.server_of[node], []).append(path)
        got = ask_all([self.sessions[s] for s in share],
                      {s: ops.Read(paths=p) for s, p in share.items()})
        return {path: text for files in got.values() for path, text in files["files"].items()}

    def fetch(self, node: str, path: str, local: Path) -> None:
        """The file or folder `path` on the node's server copied into the results at `local`,
        through its agent (chunk by chunk over the ssh session)."""
        session = self.session_of(node)
        fetch(session, path, local, session.hello["work"])

    def machine_of(self, node: str) -> str:
        return self.placement.server_of[node]

    def cores(self, machine: str) -> int:
        return int(self.sessions[machine].hello.get("cores") or 1)

    def clock_offset(self, node: str) -> float:
        """The node's server's clock minus this one's, s (a time sent there is shifted)."""
        clock = self.clocks.get(self.placement.server_of[node])
        return clock.offset_ns / 1e9 if clock is not None else 0.0

    # ---- the fidelity monitor, on every server ----
    def start_monitor(self) -> None:
        ask_all(self.sessions.values(), ops.MonitorStart())
        self._own_cpu = CpuSampler(CPU_PERIOD)  # this process's, for a server on its kernel
        self._own_cpu.start()

    def stop_monitor(self) -> list[Machine]:
        """Each machine's measurements: servers that share a kernel (one boot id: emulated
        servers) are one machine, their ports together and their CPU read once; the run's own
        processes there are each server's agent, and this process when it runs on that kernel
        too (emulated servers)."""
        if self._own_cpu is None:
            return []
        own, self._own_cpu = self._own_cpu, None
        own.stop()
        got = ask_all(self.sessions.values(), ops.MonitorStop())
        groups: dict[str, list[str]] = {}
        for server in sorted(got):
            groups.setdefault(self.sessions[server].hello.get("boot_id") or server,
                              []).append(server)
        machines = []
        for kernel, servers in groups.items():
            first = got[servers[0]]
            label = "+".join(servers) + (" (one kernel)" if len(servers) > 1 else "")
            processes = {f"{s}'s agent": got[s]["cpu_rows"] for s in servers}
            if kernel == boot_id():
                processes["runner"] = own.rows
            clock = self.clocks.get(servers[0])
            machines.append(Machine(
                servers, {n for s in servers for n in got[s]["nodes"]},
                [r for s in servers for r in got[s]["ports"]],
                next((got[s]["unavailable"] for s in servers if got[s]["unavailable"]), None),
                first["cpu_rows"], first["cores"], label, processes,
                clock.offset_ns / 1e9 if clock is not None else 0.0))
        return machines

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Both ends of the link between nodes a and b up or down, each by its server."""
        for node, peer in ((a, b), (b, a)):
            port = self.plan.port_to(node, peer)
            self.session_of(node).request(ops.Link(node=node, ifname=port.ifname, up=up))

    def set_queue_rate(self, port: Port, link: Link, rate_bps: int) -> None:
        """On the port's server: its eBPF virtual queue's rate and its monitor's."""
        self.session_of(port.node).request(ops.QueueRate(node=port.node, ifname=port.ifname,
                                                         rate=rate_bps))

    # ---- the end ----
    def close(self, on_step=None) -> int:
        """Each server's agent ends its nodes (and says what it did: its log, kept), the
        sessions end (the agents exit and delete their logs), then the servers go."""
        if self._closed:
            return 0
        self._closed = True
        killed, problems = 0, []
        if self.nft_poller is not None:
            self.nft_poller.close()
        if self._own_cpu is not None:
            self._own_cpu.stop()
        for name, session in self.sessions.items():
            try:
                killed += session.request(ops.Cleanup(), timeout=30)["killed"]
                self.agent_logs[name] = session.request(ops.Log())["text"]
            except ServerError as exc:
                problems.append(str(exc))
            session.close()
        self._write_logs()
        cleanup.remove_dirs([str(self.agent_dir)])
        self.close_shells()
        try:
            killed += self.servers.remove()
        finally:
            self.registry.close()
        if problems:
            raise TestbedError("; ".join(problems))
        return killed

    def _write_logs(self) -> None:
        if self.results_dir is None or not self.agent_logs:
            return
        logs = self.results_dir / "servers"
        logs.mkdir(parents=True, exist_ok=True)
        for name, text in self.agent_logs.items():
            (logs / f"{name}.agent.log").write_text(text)



def placement_lines(plan: FabricPlan) -> list[str]:
    """What the user reads before the build: nodes per server, what crosses, its rate."""
    assert plan.scenario.cluster is not None
    return place(plan, plan.scenario.cluster).describe(plan)


def underlay_traffic(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]],
                     seconds: float) -> dict[str, dict[str, Any]]:
    """What each server sent and received on the underlay between two counter reads (the
    VXLAN tunnels' packets, and the agents' ssh sessions: a few kB)."""
    out = {}
    for server, now in after.items():
        then = before[server]
        d = [b - a for a, b in zip(then, now)]
        out[server] = {"tx_bytes": d[4], "tx_packets": d[5], "rx_bytes": d[0],
                       "rx_packets": d[1], "errors": d[2] + d[6], "drops": d[3] + d[7],
                       "tx_mbit_s": round(d[4] * 8 / seconds / 1e6, 3) if seconds else None}
    return out
