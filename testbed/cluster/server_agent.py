"""The server agent: one per server, started over ssh, doing that server's share of a run.

    ssh root@server <python> -P -m testbed.cluster.server_agent LOG

(the repository and its venv at the same path as on the runner). It speaks JSON lines on the
ssh session's stdin/stdout, one request at a time (ops.py: the requests, their replies, the
wire); each op has one handler here, registered for its request class (`handles`). Everything
it does to a node, it does on its own server, given the node's pid there (the pid its shell
reported) and the plan, which it rebuilds from the scenario: the same functions the
single-machine build calls (`_configure_node`, NodeNetlink, FabricQueues, /proc/<pid>/net/dev),
run on the right kernel.

The workload's processes run here too: host agents, iperf3 and tcpdump are spawned in its
nodes (`spawn`, server_jobs.py), write into its work folder beside LOG, are followed (`procs`,
`read`) and signalled, and their outputs go back to the runner chunk by chunk (`listing`,
`chunk`); the fidelity monitor runs here on this kernel (`monitor_start`/`monitor_stop`).

It dies with its stdin: when the session ends, cleanly or not (the runner killed, the ssh
connection lost), it ends the processes it started and every process in its nodes'
namespaces (which removes them, their ports, tunnels, qdiscs and nft tables), unloads the eBPF
programs, and exits; so does a SIGTERM/SIGHUP. What it did goes to LOG on the server, one line
per request; the runner reads it back (`log`) into the results before ending the session, and
the agent deletes it, its work folder and its record on exit: nothing is left on the server.
Its record (RunRegistry's format, beside LOG) lists its nodes before it touches them: should
the agent itself be killed, `server_agent --clean FOLDER SERVER`, run over ssh by
`mrc-testbed clean`, ends what it lists.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

from pyroute2 import IPRoute

from testbed.cluster import ops
from testbed.cluster.server_jobs import NodeProcesses, ServerFiles
from testbed.emulation import probes
from testbed.emulation.cpu import boot_id
from testbed.emulation.machine_monitor import MachineMonitor
from testbed.emulation.network import (
    _configure_node,
    node_sysctls,
    router_hash_seed,
    rx_packets,
    send_udp,
    veth_message,
)
from testbed.emulation.nft_workers import NodeNft
from testbed.emulation.port_counters import read_net_dev, read_node_ports
from testbed.fabric.latency import port_delay
from testbed.fabric.placement import place
from testbed.fabric.plan import FabricPlan, make_plan
from testbed.fabric.routes import node_configs
from testbed.kernel import features, netns, shaping, usid_end, vxlan
from testbed.kernel.fabric_queue import FabricQueues, port_config, router_ports
from testbed.kernel.rtnl import NodeNetlink, PortSetup
from testbed.kernel.usid_end import EbpfEndSids
from testbed.lifecycle import cleanup, registry
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.workers import parallel_map
from testbed.scenario import Scenario

# on every server: node shells (mnexec), links and tunnels (ip, ethtool), processes entered
# into nodes (nsenter), the underlay check (ping), the workload's tools
SERVER_TOOLS = ("mnexec", "ip", "ethtool", "nsenter", "ping", "iperf3", "tcpdump")


class AgentError(Exception):
    """A request that cannot be done; its message goes back to the runner."""


Q = TypeVar("Q", bound=ops.Request[Any])
T = TypeVar("T")
Handler = Callable[["ServerAgent", Any], Any]
# the dispatch table: each request class of ops.py, the method answering it
HANDLERS: dict[type[ops.Request[Any]], Handler] = {}


def handles(kind: type[Q]) -> Callable[[Callable[[ServerAgent, Q], T]],
                                      Callable[[ServerAgent, Q], T]]:
    """Register the decorated method as the one answer to requests of `kind`."""
    def register(method: Callable[[ServerAgent, Q], T]) -> Callable[[ServerAgent, Q], T]:
        if kind in HANDLERS:
            raise TypeError(f"two handlers for {kind.op!r}")
        HANDLERS[kind] = method
        return method
    return register


class ServerAgent:
    """The state of one server's share: its nodes (pid, namespace), the eBPF program."""

    def __init__(self, log: Path) -> None:
        self.log_path = log
        self.log = open(log, "a", buffering=1)
        self.files = ServerFiles(log.parent / f"{log.stem}.work")
        self.procs = NodeProcesses(self.files)
        self.record: registry.RunRegistry | None = None  # this server's own, for `--clean`
        self.monitor: MachineMonitor | None = None
        self.plan: FabricPlan | None = None
        self.server = ""
        self.pids: dict[str, int] = {}  # node -> its shell's pid on this server
        self.inodes: set[int] = set()
        self.ifindex: dict[str, dict[str, int]] = {}
        self.queues: FabricQueues | None = None
        self.end_sids: EbpfEndSids | None = None  # on a kernel without seg6local
        self.handles: dict[str, NodeNetlink] = {}
        self.prober: _Prober | None = None
        self.nft: dict[str, tuple[NodeNft, threading.Event]] = {}
        self.nft_lock = threading.Lock()
        self.nft_done: list[ops.NftOutcome] = []
        self.received_ns = 0  # when the request being answered arrived (`clock`)

    def say(self, text: str) -> None:
        self.log.write(f"{time.time():.6f} {text}\n")

    # ---- requests ----
    @handles(ops.Hello)
    def op_hello(self, req: ops.Hello) -> ops.HelloReply:
        return {"pid": os.getpid(), "host": socket.gethostname(), "python": sys.version.split()[0],
                "netns": cleanup.netns_of("self"), "work": str(self.files.root),
                "cores": os.cpu_count() or 1, "boot_id": boot_id()}

    @handles(ops.Preflight)
    def op_preflight(self, req: ops.Preflight) -> list[str]:
        """What this server lacks to hold nodes, tunnels and the workload's processes."""
        missing = [f"{tool} (not found)" for tool in SERVER_TOOLS if shutil.which(tool) is None]
        lacks_vxlan = vxlan.probe()
        if lacks_vxlan:
            missing.append(f"VXLAN: {lacks_vxlan}")
        return missing

    @handles(ops.Clock)
    def op_clock(self, req: ops.Clock) -> ops.ClockReply:
        return {"t2": self.received_ns, "t3": time.time_ns()}

    @handles(ops.Plan)
    def op_plan(self, req: ops.Plan) -> ops.Empty:
        """The scenario, as the runner validated it (the plan is rebuilt from it: the plan is a
    pure function of the scenario), and this server's name."""
        self.plan = make_plan(Scenario.model_validate(req.scenario))
        self.server = req.server
        if self.record is None:  # written before any node is taken on: `--clean` reads it
            self.record = registry.RunRegistry(
                f"{req.run}-{self.server}", self.files.root, self.plan.scenario.name,
                path=record_path(self.log_path.parent, self.server))
            self.record.add_dir(self.log_path.parent)
        self.say(f"plan {self.plan.scenario.name}: server {self.server}")
        return {}

    @handles(ops.Nodes)
    def op_nodes(self, req: ops.Nodes) -> dict[str, int]:
        """Nodes whose shells started on this server, by pid: checked to exist here, their
        namespaces noted (what a lost session removes), their sysctls written."""
        plan = self._plan()
        out = {}
        for name, pid in req.pids.items():
            inode = cleanup.netns_of(pid)
            if inode is None or inode == cleanup.netns_of("self"):
                raise AgentError(f"node {name}: no process {pid} in its own namespace here")
            self.pids[name] = int(pid)
            self.inodes.add(inode)
            if self.record is not None:
                self.record.add_node(name, int(pid), inode)
            router = plan.nodes[name].role != "host"
            netns.write_sysctls(int(pid), node_sysctls(router, router_hash_seed(plan, name)))
            out[name] = inode
        self.say(f"nodes {' '.join(f'{n}={p}' for n, p in req.pids.items())}")
        return out

    @handles(ops.Configure)
    def op_configure(self, req: ops.Configure) -> dict[str, dict[str, int]]:
        """Addresses, routes, End SIDs, shapers, the eBPF queue: `FabricNetwork.configure` for
        this server's nodes, with the program loaded once here."""
        plan = self._plan()
        configs = node_configs(plan)
        links = plan.link_by_ports
        mine = set(self.pids)
        if plan.scenario.switch.enabled and self.queues is None:
            self.queues = FabricQueues()
            for port, link in router_ports(plan):
                if port.node in mine:
                    self.queues.configure(port.ifindex, port_config(link))
        mode = features.end_sid_mode()  # this server's kernel's
        if mode == "ebpf" and self.end_sids is None:
            self.end_sids = usid_end.load(plan, mine)
        fifo = req.fifo  # "node/ifname" -> bytes (the runner's rule)
        jobs = []
        for name in sorted(mine):
            router = plan.nodes[name].role != "host"
            prog = self.queues.prog_fd if self.queues is not None and router else None
            end_prog = self.end_sids.prog_fd if self.end_sids is not None and router else None
            ports = [PortSetup(port, links[(name, port.ifname)].rate,
                               fifo[f"{name}/{port.ifname}"], port_delay(plan, port))
                     for port in plan.ports(name)]
            jobs.append((self.pids[name], configs[name], ports, plan.scenario.fabric.mtu, prog,
                         mode, end_prog))
        out = {}
        for name, result in parallel_map(_configure_node, jobs, Progress(quiet=True), "routes"):
            if isinstance(result, str):
                raise AgentError(result)
            out[name] = result
            self.ifindex[name] = result
        self.say(f"configure {len(out)} nodes: {' '.join(sorted(out))}"
                 + (", eBPF queue loaded" if self.queues is not None else "")
                 + (", End SIDs in eBPF" if self.end_sids is not None else ""))
        return out

    def _handle(self, name: str) -> NodeNetlink:
        if name not in self.handles:
            self.handles[name] = NodeNetlink(self.pids[name], self.ifindex.get(name))
        return self.handles[name]

    @handles(ops.EndSids)
    def op_end_sids(self, req: ops.EndSids) -> dict[str, dict[str, int]]:
        """Packets through every End SID of this server's routers."""
        plan = self._plan()
        out: dict[str, dict[str, int]] = {}
        if self.end_sids is not None:
            for (name, sid), packets in self.end_sids.router_counters(plan, self.pids).items():
                out.setdefault(name, {})[str(sid)] = packets
        for name in sorted(self.pids):
            if plan.nodes[name].role == "host" or self.end_sids is not None:
                continue
            out[name] = {str(sid): c["packets"] or 0
                         for sid, c in self._handle(name).end_sid_counters().items()}
        self.say(f"end_sids of {len(out)} routers")
        return out

    @handles(ops.ProbeOpen)
    def op_probe_open(self, req: ops.ProbeOpen) -> ops.Empty:
        if self.prober is not None:
            self.prober.close()
        hosts = [h for h in sorted(self.pids) if self._plan().nodes[h].role == "host"]
        self.prober = _Prober({h: self.pids[h] for h in hosts}, req.nonce)
        self.say(f"probe_open: receivers and senders in {' '.join(hosts)}")
        return {}

    @handles(ops.ProbeSend)
    def op_probe_send(self, req: ops.ProbeSend) -> ops.ProbeSendReply:
        """Send probes [index, source host, address], WINDOW at a time with a pause between
        windows (the receivers are elsewhere: no arrivals to pace on)."""
        prober = self._prober()
        probes = req.probes
        for k, (index, src, address) in enumerate(probes):
            if k and k % req.window == 0:
                time.sleep(req.pause)
            prober.send(index, src, address)
        self.say(f"probe_send {len(probes)} probes from "
                 f"{' '.join(sorted({p[1] for p in probes}))}")
        return {"sent": len(probes)}

    @handles(ops.ProbeCollect)
    def op_probe_collect(self, req: ops.ProbeCollect) -> ops.ProbeCollectReply:
        """Probes that arrived at this server's hosts since the last collect:
        [index, host, destination address, arrival ifindex]."""
        arrivals = self._prober().take()
        self.say(f"probe_collect {len(arrivals)} arrivals")
        return {"arrivals": arrivals}

    @handles(ops.ProbeClose)
    def op_probe_close(self, req: ops.ProbeClose) -> ops.Empty:
        if self.prober is not None:
            self.prober.close()
            self.prober = None
        return {}

    @handles(ops.Sample)
    def op_sample(self, req: ops.Sample) -> ops.SampleReply:
        """Every port of this server's nodes: /proc/<pid>/net/dev counters, the FIFO's backlog
        and drops (when `queues`), the eBPF queue's counters; with this server's time."""
        plan = self._plan()
        out = {name: read_node_ports(self.pids[name], plan.ports(name), self._handle(name),
                                     self.queues, req.queues)
               for name in sorted(self.pids)}
        return {"time_ns": time.time_ns(), "nodes": out}

    @handles(ops.Link)
    def op_link(self, req: ops.Link) -> ops.Empty:
        """A node's port administratively up or down (a fault's link state)."""
        handle = self._handle(req.node)
        handle.ipr.link("set", index=handle.ifindex(req.ifname),
                        state="up" if req.up else "down")
        self.say(f"link {req.node} {req.ifname} {'up' if req.up else 'down'}")
        return {}

    @handles(ops.Links)
    def op_links(self, req: ops.Links) -> ops.LinksReply:
        """This server's share of the links, over netlink from the server's own namespace: a
        veth for a link whose ends are both here, this end's VXLAN device for a crossing one
        (bound to this server's underlay address, straight into its node)."""
        plan = self._plan()
        cluster = plan.scenario.cluster
        if cluster is None:
            raise AgentError("the scenario has no cluster section")
        placement = place(plan, cluster)
        mtu = plan.scenario.fabric.mtu
        veths = tunnels = 0
        with IPRoute() as rtnl:
            for link in plan.links:
                a, b = link.lower, link.upper
                mine = [p for p in (a, b) if placement.server_of[p.node] == self.server]
                if len(mine) == 2:
                    rtnl.nlm_request_batch([veth_message(
                        (a, a.ifname, self.pids[a.node]), (b, b.ifname, self.pids[b.node]),
                        mtu)])
                    veths += 1
                for port in mine if len(mine) == 1 else []:
                    peer = b if port is a else a
                    end = vxlan.TunnelEnd(
                        port.ifname, port.ifindex, port.mac, self.pids[port.node],
                        placement.vni[link.name], placement.underlay[self.server],
                        placement.underlay[placement.server_of[peer.node]],
                        cluster.vxlan_port, mtu)
                    rtnl.nlm_request_batch([vxlan.new_link_message(end)])
                    vxlan.offloads_off(end.node_pid, end.ifname)
                    tunnels += 1
        self.say(f"links: {veths} veths, {tunnels} VXLAN ends")
        return {"veths": veths, "tunnels": tunnels}

    @handles(ops.QueueRate)
    def op_queue_rate(self, req: ops.QueueRate) -> ops.Empty:
        """A router port's eBPF virtual queue drains at a new rate (the degrade fault), and
        the fidelity monitor expects the port's dequeues at that rate."""
        plan = self._plan()
        link = plan.link_by_ports[(req.node, req.ifname)]
        port = link.lower if link.lower.node == req.node else link.upper
        if self.monitor is not None:
            self.monitor.set_rate(port.ifindex, req.rate)
        if self.queues is not None and plan.nodes[port.node].role != "host":
            self.queues.set_rate(port.ifindex, port_config(link, req.rate))
            self.say(f"queue_rate {req.node} {req.ifname} {req.rate}")
        return {}

    @handles(ops.Underlay)
    def op_underlay(self, req: ops.Underlay) -> ops.UnderlayReply:
        """The underlay device (the one holding this server's underlay address): its MTU, its
        counters (/proc/net/dev order), and, when `peers` are given, a ping of `size` bytes
        with DF set to each (3 packets): the RTT in ms, or null when it did not cross."""
        address = req.address
        with IPRoute() as ipr:
            found = [a for a in ipr.get_addr() if a.get_attr("IFA_ADDRESS") == address]
            if not found:
                raise AgentError(f"no device here holds the underlay address {address}")
            index = found[0]["index"]
            link = ipr.get_links(index)[0]
            ifname, mtu = link.get_attr("IFLA_IFNAME"), int(link.get_attr("IFLA_MTU"))
        counters = read_net_dev(os.getpid(), {ifname})[ifname]
        rtts: dict[str, float | None] = {}
        for peer, peer_address in req.peers.items():
            res = subprocess.run(["ping", "-n", "-q", "-c", "3", "-i", "0.05", "-W", "1",
                                  "-M", "do", "-s", str(req.size), peer_address],
                                 capture_output=True, text=True, timeout=20)
            rtt = re.search(r"= [\d.]+/([\d.]+)/", res.stdout)
            rtts[peer] = float(rtt.group(1)) if res.returncode == 0 and rtt else None
        return {"ifname": ifname, "mtu": mtu, "counters": counters, "rtt_ms": rtts}

    @handles(ops.PortRate)
    def op_port_rate(self, req: ops.PortRate) -> ops.Empty:
        """A shaped port's line rate changed in place (the degrade fault and its undoing)."""
        handle = self._handle(req.node)
        shaping.set_port_rate(handle.ipr, handle.ifindex(req.ifname), req.rate,
                              self._plan().scenario.fabric.mtu)
        self.say(f"port_rate {req.node} {req.ifname} {req.rate}")
        return {}

    @handles(ops.PortDelay)
    def op_port_delay(self, req: ops.PortDelay) -> ops.Empty:
        """The FIFO behind a port's shaper replaced by a netem delay, or put back (None)."""
        handle = self._handle(req.node)
        shaping.set_port_delay(handle.ipr, handle.ifindex(req.ifname), req.limit,
                               req.delay, self._plan().scenario.fabric.mtu)
        self.say(f"port_delay {req.node} {req.ifname} {req.delay}")
        return {}

    @handles(ops.Routes)
    def op_routes(self, req: ops.Routes) -> ops.Empty:
        """Plain routes withdrawn and replaced as the baseline's routing converges: `delete`
        prefixes, `replace` [prefix, [[gateway, ifname], ...]]."""
        self._handle(req.node).replace_plain_routes(
            req.delete, [(p, [(gw, ifname) for gw, ifname in hops])
                            for p, hops in req.replace])
        self.say(f"routes {req.node}: {len(req.delete)} withdrawn, "
                 f"{len(req.replace)} replaced")
        return {}

    # ---- processes in its nodes, files in its folder (server_jobs.py) ----
    @handles(ops.Write)
    def op_write(self, req: ops.Write) -> ops.Empty:
        self.files.write(req.files)
        self.say(f"write {len(req.files)} files")
        return {}

    @handles(ops.Read)
    def op_read(self, req: ops.Read) -> ops.FilesReply:
        return {"files": self.files.read(req.paths)}

    @handles(ops.Spawn)
    def op_spawn(self, req: ops.Spawn) -> ops.SpawnReply:
        """A process in one of this server's nodes (a host agent, iperf3, tcpdump)."""
        node = req.node
        if node not in self.pids:
            raise AgentError(f"node {node} is not on this server")
        pid = self.procs.spawn(req.key, self.pids[node], req.argv, req.stdout,
                               req.cwd)
        self.say(f"spawn {req.key} in {node}: pid {pid}, {req.argv[0]}")
        return {"pid": pid}

    @handles(ops.Procs)
    def op_procs(self, req: ops.Procs) -> ops.ProcsReply:
        return {"status": self.procs.status()}

    @handles(ops.Signal)
    def op_signal(self, req: ops.Signal) -> ops.Empty:
        self.procs.signal(req.keys, req.signal)
        self.say(f"signal {req.signal} to {' '.join(req.keys)}")
        return {}

    @handles(ops.Listing)
    def op_listing(self, req: ops.Listing) -> ops.ListingReply:
        return {"files": self.files.listing(req.path)}

    @handles(ops.Chunk)
    def op_chunk(self, req: ops.Chunk) -> ops.ChunkReply:
        return self.files.chunk(req.path, req.offset)

    @handles(ops.Gathered)
    def op_gathered(self, req: ops.Gathered) -> ops.Empty:
        """The runner copied these files and folders back: noted (the log says what crossed)."""
        self.say(f"gathered {req.files} files, {req.bytes} B: {req.what}")
        return {}

    @handles(ops.MonitorStart)
    def op_monitor_start(self, req: ops.MonitorStart) -> ops.Empty:
        """The fidelity monitor for this server's ports and CPU (monitor.py)."""
        if self.monitor is None:
            self.monitor = MachineMonitor(self._plan(), set(self.pids))
            self.say(f"monitor_start: {len(self.monitor.ports)} ports"
                     + (f", link gaps unavailable: {self.monitor.unavailable}"
                        if self.monitor.unavailable else ""))
        return {}

    @handles(ops.MonitorStop)
    def op_monitor_stop(self, req: ops.MonitorStop) -> ops.MonitorStopReply:
        if self.monitor is None:
            raise AgentError("no monitor running (the runner sends `monitor_start` first)")
        got, self.monitor = self.monitor.stop(), None
        self.say(f"monitor_stop: {len(got['ports'])} histogram rows, "
                 f"{len(got['cpu_rows'])} CPU rows")
        return {"ports": got["ports"], "unavailable": got["unavailable"],
                "cpu_rows": got["cpu_rows"], "cores": got["cores"], "nodes": sorted(self.pids)}

    @handles(ops.RxPackets)
    def op_rx_packets(self, req: ops.RxPackets) -> ops.RxPacketsReply:
        return {"packets": rx_packets(self.pids[req.node], req.ifname)}

    @handles(ops.SendUdp)
    def op_send_udp(self, req: ops.SendUdp) -> ops.Empty:
        """Datagrams of one 5-tuple from a host here (RoCEv2's path probes)."""
        send_udp(self.pids[req.node], req.src, req.sport, req.dst,
                 req.dport, req.count)
        self.say(f"send_udp {req.node} {req.count} x {req.sport} -> {req.dport}")
        return {}

    @handles(ops.NftStart)
    def op_nft_start(self, req: ops.NftStart) -> ops.Empty:
        """A node's nftables worker (the single-machine NodeNft: a thread in the node's
        namespace with its libnftables context), `setup` applied; waits until it is ready."""
        node = req.node
        if node not in self.nft:
            stop = threading.Event()
            self.nft[node] = (NodeNft(node, self.pids[node], stop, req.setup), stop)
            self.say(f"nft_start {node}")
        self.nft[node][0].ready()
        return {}

    @handles(ops.NftSubmit)
    def op_nft_submit(self, req: ops.NftSubmit) -> ops.Empty:
        """Queue a ruleset for a time on this server's clock (the runner converted it); its
        outcome is kept for `nft_done`, in this server's clock too."""
        job = req.job

        def done(started: float | None, finished: float | None, error: str | None) -> None:
            with self.nft_lock:
                self.nft_done.append((job, started, finished, error))

        self.nft[req.node][0].submit(req.at, req.script, done)
        self.say(f"nft_submit {req.node} job {job} at {req.at}")
        return {}

    @handles(ops.NftDone)
    def op_nft_done(self, req: ops.NftDone) -> ops.NftDoneReply:
        with self.nft_lock:
            out, self.nft_done = self.nft_done, []
        return {"done": out}

    @handles(ops.NftStop)
    def op_nft_stop(self, req: ops.NftStop) -> ops.Empty:
        """The runner's injector stopped: jobs waiting for their time report as not applied."""
        worker = self.nft.get(req.node)
        if worker is not None:
            worker[1].set()
        return {}

    @handles(ops.NftClose)
    def op_nft_close(self, req: ops.NftClose) -> ops.Empty:
        """The node's worker ends: jobs still waiting for their time report as not applied."""
        worker = self.nft.pop(req.node, None)
        if worker is not None:
            worker[1].set()
            worker[0].close()
            self.say(f"nft_close {req.node}")
        return {}

    @handles(ops.Log)
    def op_log(self, req: ops.Log) -> ops.LogReply:
        self.log.flush()
        return {"text": self.log_path.read_text()}

    @handles(ops.Cleanup)
    def op_cleanup(self, req: ops.Cleanup) -> ops.CleanupReply:
        killed = self.cleanup()
        return {"killed": killed}

    # ---- the end ----
    def cleanup(self) -> int:
        """End every process in this server's node namespaces (they go with their last
        process, and their devices, qdiscs, tunnels and nft tables with them); the eBPF
        program after its ports. Idempotent."""
        if self.prober is not None:
            self.prober.close()
            self.prober = None
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        ended = self.procs.end_all()
        if ended:
            self.say(f"cleanup: {ended} processes it started were still running, ended")
        for node in list(self.nft):
            self.op_nft_close(ops.NftClose(node))
        for handle in self.handles.values():
            handle.close()
        self.handles.clear()
        killed = cleanup.kill_namespaces(self.inodes) if self.inodes else 0
        if self.inodes:
            self.say(f"cleanup: {killed} processes in {len(self.inodes)} node namespaces ended")
        self.inodes.clear()
        self.pids.clear()
        if self.queues is not None:
            self.queues.close()
            self.queues = None
        if self.end_sids is not None:
            self.end_sids.close()
            self.end_sids = None
        return killed

    def _plan(self) -> FabricPlan:
        if self.plan is None:
            raise AgentError("no plan yet (the runner sends `plan` first)")
        return self.plan

    def _prober(self) -> _Prober:
        if self.prober is None:
            raise AgentError("no probe sockets (the runner sends `probe_open` first)")
        return self.prober


class _Prober:
    """Probe sockets in this server's hosts: a sender and a receiver in each (probes.py), a
    thread draining the receivers."""

    def __init__(self, pids: dict[str, int], nonce: int) -> None:
        self.nonce = nonce
        self.senders: dict[str, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        self.arrivals: list[ops.Arrival] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        for host, pid in pids.items():
            self.senders[host] = netns.socket_in(pid, socket.AF_INET6, socket.SOCK_DGRAM)
            self.selector.register(probes.receiver(pid), selectors.EVENT_READ, host)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def send(self, index: int, src: str, address: str) -> None:
        self.senders[src].sendto(probes.payload(self.nonce, index),
                                 (address, probes.PROBE_PORT))

    def _drain(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.selector.select(0.05):
                assert isinstance(key.fileobj, socket.socket)  # only receivers are registered
                got = [(index, key.data, None if address is None else str(address), ifindex)
                       for index, address, ifindex in probes.receive(key.fileobj, self.nonce)]
                with self.lock:
                    self.arrivals += got

    def take(self) -> list[ops.Arrival]:
        with self.lock:
            out, self.arrivals = self.arrivals, []
        return out

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()
        for sock in self.senders.values():
            sock.close()


def serve(agent: ServerAgent, requests: TextIO, replies: TextIO) -> None:
    """Answer requests until stdin ends; every error is one line back, naming what failed."""
    for line in requests:
        agent.received_ns = time.time_ns()
        try:
            req = ops.decode(json.loads(line))
            reply = {"ok": True, "result": HANDLERS[type(req)](agent, req)}
        except Exception as exc:  # noqa: BLE001 (sent back: the runner says it, naming us)
            agent.say(f"error: {type(exc).__name__}: {exc}")
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def record_path(folder: Path, server: str) -> Path:
    """The server agent's own record of what it took on (RunRegistry's format), in its
    folder: what `--clean` ends should the agent itself have died without cleaning."""
    return folder / f"{server}.jsonl"


def clean(folder: Path, server: str) -> dict:
    """`mrc-testbed clean`, run over ssh on a server a dead run used: the agent (if it still
    lives, hung) is killed, then every node namespace its record proves is emptied, and its
    folder removed. By the record's names only; nothing is guessed."""
    problems: list[str] = []
    record = registry.read_record(record_path(folder, server), problems)
    if record is None:  # the agent cleaned up and exited: nothing of the run is left
        cleanup.remove_dirs([str(folder)])
        return {"killed": 0, "nodes": 0, "problems": problems}
    killed = 0
    if record.runner_alive():
        os.kill(record.runner_pid, signal.SIGKILL)
        killed += 1
        deadline = time.monotonic() + 5
        while (registry.start_time(record.runner_pid) is not None and
                time.monotonic() < deadline):
            time.sleep(0.02)
    killed += cleanup.clean_record(record, "crashed: cleaned over ssh", problems)
    return {"killed": killed, "nodes": len(record.nodes), "problems": problems}


def main() -> None:
    if sys.argv[1] == "--clean":
        print(json.dumps(clean(Path(sys.argv[2]), sys.argv[3])), flush=True)
        return
    log = Path(sys.argv[1])
    # the protocol owns the real stdout; anything else printed (a library's warning, a forked
    # worker's traceback) goes to the log, never into the stream of replies
    replies = os.fdopen(os.dup(1), "w")
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    agent = ServerAgent(log)

    def end(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, end)
    agent.say(f"started, pid {os.getpid()}")
    try:
        replies.write(json.dumps({"ok": True, "result": agent.op_hello(ops.Hello())}) + "\n")
        replies.flush()
        serve(agent, sys.stdin, replies)
        agent.say("stdin ended")
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the clean-up
        try:
            agent.cleanup()
            agent.files.remove()
            if agent.record is not None:
                agent.record.close()
        except Exception as exc:  # noqa: BLE001 (nobody to tell but the log)
            agent.say(f"cleanup failed: {type(exc).__name__}: {exc}")
        agent.log.close()
        log.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            log.parent.rmdir()  # the run's folder, once every agent sharing it is gone


if __name__ == "__main__":
    main()
