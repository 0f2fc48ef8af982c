"""The server agent: one per server, started over ssh, doing that server's share of a run.

    ssh root@server <python> -P -m testbed.emulation.cluster.server_agent LOG

(the repository and its venv at the same path as on the runner). It speaks JSON lines on the
ssh session's stdin/stdout, one request at a time: `{"op": ..., ...}` in, `{"ok": true,
"result": ...}` or `{"ok": false, "error": "..."}` out. Everything it does to a node, it does
on its own server, given the node's pid there (the pid its shell reported) and the plan, which
it rebuilds from the scenario: the same functions the single-machine build calls
(`_configure_node`, NodeNetlink, FabricQueues, /proc/<pid>/net/dev), run on the right kernel.

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
import struct
import subprocess
import sys
import threading
import time
from ipaddress import IPv6Address
from pathlib import Path

from pyroute2 import IPRoute

from testbed.emulation.cluster.server_jobs import NodeProcesses, ServerFiles
from testbed.emulation.cpu import boot_id
from testbed.emulation.machine_monitor import MachineMonitor
from testbed.emulation.network import (
    _configure_node,
    ecmp_hash_seed,
    node_sysctls,
    rx_packets,
    send_udp,
    veth_message,
)
from testbed.emulation.nft_workers import NodeNft
from testbed.emulation.port_counters import read_net_dev, read_node_ports
from testbed.fabric.placement import place
from testbed.fabric.plan import FabricPlan, make_plan
from testbed.fabric.routes import node_configs
from testbed.kernel import netns, shaping, vxlan
from testbed.kernel.fabric_queue import FabricQueues, port_config, router_ports
from testbed.kernel.rtnl import NodeNetlink
from testbed.lifecycle import cleanup, registry
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.workers import parallel_map
from testbed.scenario import Scenario

PROBE_PORT = 7471
# on every server: node shells (mnexec), links and tunnels (ip, ethtool), processes entered
# into nodes (nsenter), the underlay check (ping), the workload's tools
SERVER_TOOLS = ("mnexec", "ip", "ethtool", "nsenter", "ping", "iperf3", "tcpdump")
_PAYLOAD = struct.Struct("!4sII")  # magic, nonce, probe index (as verify.py sends them)
_PKTINFO = struct.Struct("16si")
MAGIC = b"MRCp"


class AgentError(Exception):
    """A request that cannot be done; its message goes back to the runner."""


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
        self.handles: dict[str, NodeNetlink] = {}
        self.prober: _Prober | None = None
        self.nft: dict[str, tuple[NodeNft, threading.Event]] = {}
        self.nft_lock = threading.Lock()
        self.nft_done: list[list] = []

    def say(self, text: str) -> None:
        self.log.write(f"{time.time():.6f} {text}\n")

    # ---- requests ----
    def op_hello(self, req: dict) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname(), "python": sys.version.split()[0],
                "netns": cleanup.netns_of("self"), "work": str(self.files.root),
                "cores": os.cpu_count() or 1, "boot_id": boot_id()}

    def op_preflight(self, req: dict) -> list[str]:
        """What this server lacks to hold nodes, tunnels and the workload's processes."""
        missing = [f"{tool} (not found)" for tool in SERVER_TOOLS if shutil.which(tool) is None]
        lacks_vxlan = vxlan.probe()
        if lacks_vxlan:
            missing.append(f"VXLAN: {lacks_vxlan}")
        return missing

    def op_clock(self, req: dict) -> dict:
        return {"t2": req["_received_ns"], "t3": time.time_ns()}

    def op_plan(self, req: dict) -> dict:
        """The scenario, as the runner validated it (the plan is rebuilt from it: the plan is a
    pure function of the scenario), and this server's name."""
        self.plan = make_plan(Scenario.model_validate(req["scenario"]))
        self.server = req["server"]
        if self.record is None:  # written before any node is taken on: `--clean` reads it
            self.record = registry.RunRegistry(
                f"{req['run']}-{self.server}", self.files.root, self.plan.scenario.name,
                path=record_path(self.log_path.parent, self.server))
            self.record.add_dir(self.log_path.parent)
        self.say(f"plan {self.plan.scenario.name}: server {self.server}")
        return {}

    def op_nodes(self, req: dict) -> dict:
        """Nodes whose shells started on this server, by pid: checked to exist here, their
        namespaces noted (what a lost session removes), their sysctls written."""
        plan = self._plan()
        out = {}
        for name, pid in req["pids"].items():
            inode = cleanup.netns_of(pid)
            if inode is None or inode == cleanup.netns_of("self"):
                raise AgentError(f"node {name}: no process {pid} in its own namespace here")
            self.pids[name] = int(pid)
            self.inodes.add(inode)
            if self.record is not None:
                self.record.add_node(name, int(pid), inode)
            router = plan.nodes[name].role != "host"
            seed = ecmp_hash_seed(plan.scenario.seed, name) if router else None
            netns.write_sysctls(int(pid), node_sysctls(router, seed))
            out[name] = inode
        self.say(f"nodes {' '.join(f'{n}={p}' for n, p in req['pids'].items())}")
        return out

    def op_configure(self, req: dict) -> dict:
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
        fifo: dict[str, int] = req["fifo"]  # "node/ifname" -> bytes (runner's rule)
        jobs = []
        for name in sorted(mine):
            router = plan.nodes[name].role != "host"
            prog = self.queues.prog_fd if self.queues is not None and router else None
            ports = [(port, links[(name, port.ifname)].rate, fifo[f"{name}/{port.ifname}"])
                     for port in plan.ports(name)]
            jobs.append((self.pids[name], configs[name], ports, plan.scenario.fabric.mtu, prog))
        out = {}
        for name, result in parallel_map(_configure_node, jobs, Progress(quiet=True), "routes"):
            if isinstance(result, str):
                raise AgentError(result)
            out[name] = result
            self.ifindex[name] = result
        self.say(f"configure {len(out)} nodes: {' '.join(sorted(out))}"
                 + (", eBPF queue loaded" if self.queues is not None else ""))
        return out

    def _handle(self, name: str) -> NodeNetlink:
        if name not in self.handles:
            self.handles[name] = NodeNetlink(self.pids[name], self.ifindex.get(name))
        return self.handles[name]

    def op_end_sids(self, req: dict) -> dict:
        """Packets through every End SID of this server's routers."""
        plan = self._plan()
        out = {}
        for name in sorted(self.pids):
            if plan.nodes[name].role == "host":
                continue
            out[name] = {str(sid): c["packets"] or 0
                         for sid, c in self._handle(name).end_sid_counters().items()}
        self.say(f"end_sids of {len(out)} routers")
        return out

    def op_probe_open(self, req: dict) -> dict:
        if self.prober is not None:
            self.prober.close()
        hosts = [h for h in sorted(self.pids) if self._plan().nodes[h].role == "host"]
        self.prober = _Prober({h: self.pids[h] for h in hosts}, int(req["nonce"]))
        self.say(f"probe_open: receivers and senders in {' '.join(hosts)}")
        return {}

    def op_probe_send(self, req: dict) -> dict:
        """Send probes [index, source host, address], WINDOW at a time with a pause between
        windows (the receivers are elsewhere: no arrivals to pace on)."""
        prober = self._prober()
        probes = req["probes"]
        for k, (index, src, address) in enumerate(probes):
            if k and k % int(req["window"]) == 0:
                time.sleep(float(req["pause"]))
            prober.send(index, src, address)
        self.say(f"probe_send {len(probes)} probes from "
                 f"{' '.join(sorted({p[1] for p in probes}))}")
        return {"sent": len(probes)}

    def op_probe_collect(self, req: dict) -> dict:
        """Probes that arrived at this server's hosts since the last collect:
        [index, host, destination address, arrival ifindex]."""
        arrivals = self._prober().take()
        self.say(f"probe_collect {len(arrivals)} arrivals")
        return {"arrivals": arrivals}

    def op_probe_close(self, req: dict) -> dict:
        if self.prober is not None:
            self.prober.close()
            self.prober = None
        return {}

    def op_sample(self, req: dict) -> dict:
        """Every port of this server's nodes: /proc/<pid>/net/dev counters, the FIFO's backlog
        and drops (when `queues`), the eBPF queue's counters; with this server's time."""
        plan = self._plan()
        out = {name: read_node_ports(self.pids[name], plan.ports(name), self._handle(name),
                                     self.queues, bool(req.get("queues")))
               for name in sorted(self.pids)}
        return {"time_ns": time.time_ns(), "nodes": out}

    def op_link(self, req: dict) -> dict:
        """A node's port administratively up or down (a fault's link state)."""
        handle = self._handle(req["node"])
        handle.ipr.link("set", index=handle.ifindex(req["ifname"]),
                        state="up" if req["up"] else "down")
        self.say(f"link {req['node']} {req['ifname']} {'up' if req['up'] else 'down'}")
        return {}

    def op_links(self, req: dict) -> dict:
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

    def op_queue_rate(self, req: dict) -> dict:
        """A router port's eBPF virtual queue drains at a new rate (the degrade fault), and
        the fidelity monitor expects the port's dequeues at that rate."""
        plan = self._plan()
        link = plan.link_by_ports[(req["node"], req["ifname"])]
        port = link.lower if link.lower.node == req["node"] else link.upper
        if self.monitor is not None:
            self.monitor.set_rate(port.ifindex, int(req["rate"]))
        if self.queues is not None and plan.nodes[port.node].role != "host":
            self.queues.set_rate(port.ifindex, port_config(link, int(req["rate"])))
            self.say(f"queue_rate {req['node']} {req['ifname']} {req['rate']}")
        return {}

    def op_underlay(self, req: dict) -> dict:
        """The underlay device (the one holding this server's underlay address): its MTU, its
        counters (/proc/net/dev order), and, when `peers` are given, a ping of `size` bytes
        with DF set to each (3 packets): the RTT in ms, or null when it did not cross."""
        address = req["address"]
        with IPRoute() as ipr:
            found = [a for a in ipr.get_addr() if a.get_attr("IFA_ADDRESS") == address]
            if not found:
                raise AgentError(f"no device here holds the underlay address {address}")
            index = found[0]["index"]
            link = ipr.get_links(index)[0]
            ifname, mtu = link.get_attr("IFLA_IFNAME"), int(link.get_attr("IFLA_MTU"))
        counters = read_net_dev(os.getpid(), {ifname}).get(ifname)
        rtts: dict[str, float | None] = {}
        for peer, peer_address in (req.get("peers") or {}).items():
            res = subprocess.run(["ping", "-n", "-q", "-c", "3", "-i", "0.05", "-W", "1",
                                  "-M", "do", "-s", str(int(req["size"])), peer_address],
                                 capture_output=True, text=True, timeout=20)
            rtt = re.search(r"= [\d.]+/([\d.]+)/", res.stdout)
            rtts[peer] = float(rtt.group(1)) if res.returncode == 0 and rtt else None
        return {"ifname": ifname, "mtu": mtu, "counters": counters, "rtt_ms": rtts}

    def op_port_rate(self, req: dict) -> dict:
        """A shaped port's line rate changed in place (the degrade fault and its undoing)."""
        handle = self._handle(req["node"])
        shaping.set_port_rate(handle.ipr, handle.ifindex(req["ifname"]), int(req["rate"]),
                              self._plan().scenario.fabric.mtu)
        self.say(f"port_rate {req['node']} {req['ifname']} {req['rate']}")
        return {}

    def op_port_delay(self, req: dict) -> dict:
        """The FIFO behind a port's shaper replaced by a netem delay, or put back (None)."""
        handle = self._handle(req["node"])
        delay = None if req["delay"] is None else float(req["delay"])
        shaping.set_port_delay(handle.ipr, handle.ifindex(req["ifname"]), int(req["limit"]),
                               delay, self._plan().scenario.fabric.mtu)
        self.say(f"port_delay {req['node']} {req['ifname']} {delay}")
        return {}

    def op_routes(self, req: dict) -> dict:
        """Plain routes withdrawn and replaced as the baseline's routing converges: `delete`
        prefixes, `replace` [prefix, [[gateway, ifname], ...]]."""
        self._handle(req["node"]).replace_plain_routes(
            req["delete"], [(p, [(gw, ifname) for gw, ifname in hops])
                            for p, hops in req["replace"]])
        self.say(f"routes {req['node']}: {len(req['delete'])} withdrawn, "
                 f"{len(req['replace'])} replaced")
        return {}

    # ---- processes in its nodes, files in its folder (server_jobs.py) ----
    def op_write(self, req: dict) -> dict:
        self.files.write(req["files"])
        self.say(f"write {len(req['files'])} files")
        return {}

    def op_read(self, req: dict) -> dict:
        return {"files": self.files.read(req["paths"])}

    def op_spawn(self, req: dict) -> dict:
        """A process in one of this server's nodes (a host agent, iperf3, tcpdump)."""
        node = req["node"]
        if node not in self.pids:
            raise AgentError(f"node {node} is not on this server")
        pid = self.procs.spawn(req["key"], self.pids[node], req["argv"], req["stdout"],
                               req.get("cwd"))
        self.say(f"spawn {req['key']} in {node}: pid {pid}, {req['argv'][0]}")
        return {"pid": pid}

    def op_procs(self, req: dict) -> dict:
        return {"status": self.procs.status()}

    def op_signal(self, req: dict) -> dict:
        self.procs.signal(req["keys"], int(req["signal"]))
        self.say(f"signal {req['signal']} to {' '.join(req['keys'])}")
        return {}

    def op_listing(self, req: dict) -> dict:
        return {"files": self.files.listing(req["path"])}

    def op_chunk(self, req: dict) -> dict:
        return self.files.chunk(req["path"], int(req["offset"]))

    def op_gathered(self, req: dict) -> dict:
        """The runner copied these files and folders back: noted (the log says what crossed)."""
        self.say(f"gathered {req['files']} files, {req['bytes']} B: {req['what']}")
        return {}

    def op_monitor_start(self, req: dict) -> dict:
        """The fidelity monitor for this server's ports and CPU (monitor.py)."""
        if self.monitor is None:
            self.monitor = MachineMonitor(self._plan(), set(self.pids))
            self.say(f"monitor_start: {len(self.monitor.ports)} ports"
                     + (f", link gaps unavailable: {self.monitor.unavailable}"
                        if self.monitor.unavailable else ""))
        return {}

    def op_monitor_stop(self, req: dict) -> dict:
        if self.monitor is None:
            raise AgentError("no monitor running (the runner sends `monitor_start` first)")
        got, self.monitor = self.monitor.stop(), None
        self.say(f"monitor_stop: {len(got['ports'])} histogram rows, "
                 f"{len(got['cpu_rows'])} CPU rows")
        return {**got, "nodes": sorted(self.pids)}

    def op_rx_packets(self, req: dict) -> dict:
        return {"packets": rx_packets(self.pids[req["node"]], req["ifname"])}

    def op_send_udp(self, req: dict) -> dict:
        """Datagrams of one 5-tuple from a host here (RoCEv2's path probes)."""
        send_udp(self.pids[req["node"]], req["src"], int(req["sport"]), req["dst"],
                 int(req["dport"]), int(req["count"]))
        self.say(f"send_udp {req['node']} {req['count']} x {req['sport']} -> {req['dport']}")
        return {}

    def op_nft_start(self, req: dict) -> dict:
        """A node's nftables worker (the single-machine NodeNft: a thread in the node's
        namespace with its libnftables context), `setup` applied; waits until it is ready."""
        node = req["node"]
        if node not in self.nft:
            stop = threading.Event()
            self.nft[node] = (NodeNft(node, self.pids[node], stop, req.get("setup", "")), stop)
            self.say(f"nft_start {node}")
        self.nft[node][0].ready()
        return {}

    def op_nft_submit(self, req: dict) -> dict:
        """Queue a ruleset for a time on this server's clock (the runner converted it); its
        outcome is kept for `nft_done`, in this server's clock too."""
        job = int(req["job"])

        def done(started: float | None, finished: float | None, error: str | None) -> None:
            with self.nft_lock:
                self.nft_done.append([job, started, finished, error])

        self.nft[req["node"]][0].submit(req["at"], req["script"], done)
        self.say(f"nft_submit {req['node']} job {job} at {req['at']}")
        return {}

    def op_nft_done(self, req: dict) -> dict:
        with self.nft_lock:
            out, self.nft_done = self.nft_done, []
        return {"done": out}

    def op_nft_stop(self, req: dict) -> dict:
        """The runner's injector stopped: jobs waiting for their time report as not applied."""
        worker = self.nft.get(req["node"])
        if worker is not None:
            worker[1].set()
        return {}

    def op_nft_close(self, req: dict) -> dict:
        """The node's worker ends: jobs still waiting for their time report as not applied."""
        worker = self.nft.pop(req["node"], None)
        if worker is not None:
            worker[1].set()
            worker[0].close()
            self.say(f"nft_close {req['node']}")
        return {}

    def op_log(self, req: dict) -> dict:
        self.log.flush()
        return {"text": self.log_path.read_text()}

    def op_cleanup(self, req: dict) -> dict:
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
            self.op_nft_close({"node": node})
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
    """Probe sockets in this server's hosts: a sender in each, a receiver in each (port
    PROBE_PORT, arrival address and port reported), a thread draining the receivers."""

    def __init__(self, pids: dict[str, int], nonce: int) -> None:
        self.nonce = nonce
        self.senders: dict[str, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        self.arrivals: list[list] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        for host, pid in pids.items():
            self.senders[host] = netns.socket_in(pid, socket.AF_INET6, socket.SOCK_DGRAM)
            sock = netns.socket_in(pid, socket.AF_INET6, socket.SOCK_DGRAM)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            sock.bind(("::", PROBE_PORT))
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ, host)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def send(self, index: int, src: str, address: str) -> None:
        self.senders[src].sendto(_PAYLOAD.pack(MAGIC, self.nonce, index), (address, PROBE_PORT))

    def _drain(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.selector.select(0.05):
                sock, host = key.fileobj, key.data
                while True:
                    try:
                        data, anc, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(_PKTINFO.size))
                    except (BlockingIOError, OSError):
                        break
                    if len(data) != _PAYLOAD.size:
                        continue
                    magic, nonce, index = _PAYLOAD.unpack(data)
                    if magic != MAGIC or nonce != self.nonce:
                        continue
                    address, ifindex = None, None
                    for level, kind, value in anc:
                        if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO:
                            raw, ifindex = _PKTINFO.unpack(value[:_PKTINFO.size])
                            address = str(IPv6Address(raw))
                    with self.lock:
                        self.arrivals.append([index, host, address, ifindex])

    def take(self) -> list[list]:
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


def serve(agent: ServerAgent, requests, replies) -> None:
    """Answer requests until stdin ends; every error is one line back, naming what failed."""
    for line in requests:
        received = time.time_ns()
        try:
            req = json.loads(line)
            op = getattr(agent, f"op_{req.get('op')}", None)
            if op is None:
                raise AgentError(f"unknown request {req.get('op')!r}")
            req["_received_ns"] = received
            reply = {"ok": True, "result": op(req)}
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
        while registry.start_time(record.runner_pid) is not None and \
                time.monotonic() < deadline:
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
        replies.write(json.dumps({"ok": True, "result": agent.op_hello({})}) + "\n")
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
