"""The Mininet network that realizes a plan: nodes, veth links, kernel state, and its end.

Mininet gives every node its namespace and shell (so `--cli`, `h0 ping ...` and the usual
Mininet workflow work), but its per-link shell commands (`ip link add`, `ifconfig` per port)
would dominate the build. Links are therefore created over netlink straight into both
namespaces, and each node is then configured over one netlink socket. There is no switch and
no controller: every router is a Linux namespace with forwarding on.
"""
from __future__ import annotations

import os
import socket
import subprocess
import threading
import zlib
from collections.abc import Callable
from ipaddress import IPv6Network
from pathlib import Path

from mininet.link import Intf
from mininet.link import Link as MininetLink
from mininet.node import Host
from pyroute2 import IPRoute
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST
from pyroute2.netlink.rtnl import RTM_NEWLINK
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from testbed.emulation.machine_monitor import Machine, MachineMonitor
from testbed.emulation.nft_workers import NodeNft
from testbed.emulation.port_counters import PortSample, read_node_ports
from testbed.emulation.probes import ProbeJob, ProbeOutcome
from testbed.emulation.shells import MininetFabric
from testbed.emulation.verify import probe_all, read_counters
from testbed.fabric.latency import port_delay
from testbed.fabric.plan import FabricPlan, Link, Port
from testbed.fabric.routes import node_configs
from testbed.kernel import features, netns, shaping, usid_end
from testbed.kernel.fabric_queue import FabricQueues, port_config, router_ports
from testbed.kernel.rtnl import NodeNetlink, PortSetup
from testbed.kernel.usid_end import EbpfEndSids
from testbed.lifecycle import cleanup, files
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import RunRegistry
from testbed.lifecycle.workers import parallel_map

_IPV6_SYSCTLS = {
    "forwarding": 1,  # hosts too: a host's End SID may be a waypoint
    "seg6_enabled": 1,  # SRH processing, should a path carry one
    "accept_dad": 0,  # addresses usable at once: no 1-2 s of tentative state
    "dad_transmits": 0,
    "keep_addr_on_down": 1,  # a link_down fault must not erase the plan's addresses
    "accept_ra": 0,
    "autoconf": 0,
    "router_solicitations": 0,
    "disable_ipv6": 0,
}


def ecmp_hash_seed(seed: int, node: str) -> int:
    """Each router's ECMP hash seed, from the scenario seed and its name: which spine a
    RoCEv2 flow's 5-tuple lands on is then reproducible, and changes with the seed (a sweep
    over seeds samples the baseline's collisions). Never 0, which asks the kernel for a
    random seed."""
    return zlib.crc32(f"{seed}/{node}".encode()) | 1


def router_hash_seed(plan: FabricPlan, name: str) -> int | None:
    """The ECMP hash seed to give node `name`: None for a host, and on a kernel that takes
    none (features.hash_seed_settable), whose routers keep the boot-time key."""
    if plan.nodes[name].role == "host" or not features.hash_seed_settable():
        return None
    return ecmp_hash_seed(plan.scenario.seed, name)


def node_sysctls(router: bool, hash_seed: int | None = None) -> dict[str, int]:
    values = {}
    for scope in ("all", "default"):
        for key, value in _IPV6_SYSCTLS.items():
            values[f"net.ipv6.conf.{scope}.{key}"] = value
    values["net.ipv6.icmp.ratelimit"] = 0  # every ICMP error visible when debugging a path
    if router:
        values["net.ipv6.fib_multipath_hash_policy"] = 1  # L4 hash: RoCEv2's UDP source port
    if router and hash_seed is not None:  # the kernel's one seed serves IPv4 and IPv6 (>= 6.11)
        values["net.ipv4.fib_multipath_hash_seed"] = hash_seed
    return values


FIFO_HEADROOM = 2  # FIFO size / queue limit at ports whose limit the eBPF program enforces


def fifo_limit(plan: FabricPlan, port: Port, link: Link) -> int:
    """Bytes of the FIFO behind the port's shaper. Where the ECN/trimming program runs (router
    ports), its virtual queue enforces the link's queue limit (the buffer, or in lossless mode
    the lossless limit), and the FIFO gets headroom: a shaper running late on a busy CPU must
    not drop what the program let through. Host ports are the NIC's own queue, which the
    agents keep below half the buffer (testbed/run/traffic.py nic_limits)."""
    if plan.scenario.switch.enabled and plan.nodes[port.node].role != "host":
        return link.limit * FIFO_HEADROOM
    return link.buffer


class NetlinkIntf(Intf):
    """A Mininet interface configured over netlink by the build, not by `ifconfig`."""

    def config(self, **_params) -> dict:
        return {}


class NetlinkVeth(MininetLink):
    """A Mininet link whose veth pair is made by one netlink message into both namespaces,
    with the plan's interface indexes (distinct across the fabric) and MACs."""

    def __init__(self, node1: Host, node2: Host, rtnl: IPRoute, mtu: int,
                 ports: tuple[Port, Port], **params) -> None:
        self._rtnl, self._mtu, self._ports = rtnl, mtu, ports
        for key in ("intf", "addr1", "addr2"):  # Mininet.addLink's defaults: ours win
            params.pop(key, None)
        super().__init__(node1, node2, intf=NetlinkIntf, addr1=ports[0].mac,
                         addr2=ports[1].mac, **params)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None,
                     node2=None, deleteIntfs=True, **_kw):  # Mininet's name
        self._rtnl.nlm_request_batch([veth_message(
            (self._ports[0], intfname1, node1.pid), (self._ports[1], intfname2, node2.pid),
            self._mtu)])


def veth_message(a: tuple[Port, str, int], b: tuple[Port, str, int], mtu: int) -> ifinfmsg:
    """One netlink message making a veth pair straight into two namespaces: each end as
    (port, interface name, pid of a process in the namespace), with the plan's index and MAC.

    gso_max_segs 1: a switch port queues packets, not 64 KB TSO super-packets (which would
    also never fit a byte FIFO smaller than themselves); TCP then sends MTU-sized segments, as
    it would through a real switch. pyroute2's link("add") cannot give the peer an index, hence
    the message built by hand."""
    def end(port: Port, ifname: str, pid: int) -> tuple[int, list]:
        return port.ifindex, [("IFLA_IFNAME", ifname), ("IFLA_NET_NS_PID", pid),
                              ("IFLA_ADDRESS", port.mac), ("IFLA_MTU", mtu),
                              ("IFLA_GSO_MAX_SEGS", 1)]

    index, attrs = end(*a)
    peer_index, peer_attrs = end(*b)
    msg = ifinfmsg()
    msg["family"] = socket.AF_UNSPEC
    msg["index"] = index
    msg["attrs"] = attrs + [("IFLA_LINKINFO", {"attrs": [
        ("IFLA_INFO_KIND", "veth"),
        ("IFLA_INFO_DATA", {"attrs": [
            ("VETH_INFO_PEER", {"index": peer_index, "attrs": peer_attrs})]})]})]
    msg["header"]["type"] = RTM_NEWLINK
    msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    return msg


def _configure_node(job: tuple) -> tuple[str, dict[str, int] | str]:
    """Configure one node; its interface indexes, or what went wrong."""
    pid, cfg, ports, mtu, queue_prog, end_sids, end_prog = job
    try:
        handle = NodeNetlink(pid)
        try:
            handle.configure(cfg, ports, mtu, queue_prog, end_sids, end_prog)
            return cfg.name, handle.ifindexes()
        finally:
            handle.close()
    except Exception as exc:  # noqa: BLE001 (sent back to the runner with the node's name)
        return cfg.name, f"configuring {cfg.name}: {type(exc).__name__}: {exc}"


def rx_packets(pid: int, ifname: str) -> int:
    """Packets received by a port of the namespace of `pid`."""
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, counters = line.partition(":")
        if name.strip() == ifname:
            return int(counters.split()[1])
    raise KeyError(ifname)


def send_udp(pid: int, src: str, sport: int, dst: str, dport: int, count: int) -> None:
    """`count` datagrams of 64 B from (src, sport) to (dst, dport), in the namespace of `pid`."""
    sock = netns.socket_in(pid, socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        sock.bind((src, sport))
        for _ in range(count):
            sock.sendto(b"\0" * 64, (dst, dport))
    finally:
        sock.close()


class FabricNetwork(MininetFabric):
    """The fabric on this machine. Build with `build()` (testbed/run/build.py), always end
    with `close()` (idempotent, safe after partial builds)."""

    def __init__(self, plan: FabricPlan, registry: RunRegistry, progress: Progress) -> None:
        super().__init__(plan, registry, progress)
        self.inodes: set[int] = set()
        self.queues: FabricQueues | None = None  # the eBPF ECN/trimming program, if asked for
        self.end_sids: EbpfEndSids | None = None  # the eBPF End SIDs, on a kernel without seg6local
        self.monitor: MachineMonitor | None = None  # the fidelity monitor's, while it runs
        self._netlink: dict[str, NodeNetlink] = {}
        self._thread_sockets = threading.local()  # each thread's own (injector, telemetry)
        self._all_sockets: list[NodeNetlink] = []

    # ---- build phases (build() times each) ----
    def prepare(self, progress: Progress) -> None:
        """Nothing to make before the nodes: they all live on this machine."""

    def facts(self) -> dict[str, object] | None:
        """No machines but this one to record."""
        return None

    def underlay_counters(self) -> dict[str, tuple[int, ...]]:
        """No underlay between machines."""
        return {}

    def node_started(self, name: str) -> None:
        """A node's shell is up: note its namespace (what teardown empties), its sysctls."""
        node = self.net[name]
        inode = netns.netns_inode(node.pid)
        self.inodes.add(inode)
        self.registry.add_node(name, node.pid, inode)
        router = self.plan.nodes[name].role != "host"
        netns.write_sysctls(node.pid, node_sysctls(router, router_hash_seed(self.plan, name)))

    def add_links(self) -> str:
        mtu = self.plan.scenario.fabric.mtu
        with IPRoute() as rtnl:
            for link in self.progress.bar(self.plan.links, len(self.plan.links), "links"):
                a, b = link.lower, link.upper
                self.net.addLink(self.net[a.node], self.net[b.node], cls=NetlinkVeth,
                                 rtnl=rtnl, mtu=mtu, ports=(a, b),
                                 intfName1=a.ifname, intfName2=b.ifname)
        return f"{len(self.plan.links)} veth links"

    def configure(self) -> None:
        """Addresses, neighbours, routes, End SIDs, shapers and the ECN/trimming program of
        router ports, one netlink socket per node, nodes spread over the cores (each worker
        enters the nodes' namespaces itself; forked after the program's load, it holds its fd)."""
        configs = node_configs(self.plan)
        mtu = self.plan.scenario.fabric.mtu
        links = self.plan.link_by_ports
        if self.plan.scenario.switch.enabled:
            self.queues = FabricQueues()
            for port, link in router_ports(self.plan):
                self.queues.configure(port.ifindex, port_config(link))
        mode = features.end_sid_mode()
        if mode == "ebpf":
            self.end_sids = usid_end.load(self.plan)
        jobs = []
        for name, cfg in configs.items():
            router = self.plan.nodes[name].role != "host"
            prog = self.queues.prog_fd if self.queues is not None and router else None
            end_prog = self.end_sids.prog_fd if self.end_sids is not None and router else None
            ports = [PortSetup(port, links[(name, port.ifname)].rate,
                               self.fifo_limit(port, links[(name, port.ifname)]),
                               port_delay(self.plan, port))
                     for port in self.plan.ports(name)]
            jobs.append((self.pid(name), cfg, ports, mtu, prog, mode, end_prog))
        for name, result in parallel_map(_configure_node, jobs, self.progress, "routes"):
            if isinstance(result, str):
                raise RuntimeError(result)
            self.ifindex[name] = result

    # ---- access ----
    def netlink(self, name: str) -> NodeNetlink:
        if name not in self._netlink:
            self._netlink[name] = NodeNetlink(self.pid(name), self.ifindex.get(name))
        return self._netlink[name]

    def rx_packets(self, node: str, ifname: str) -> int:
        """Packets the node's port received (/proc/<pid>/net/dev)."""
        return rx_packets(self.pid(node), ifname)

    def send_udp(self, host: str, src: str, sport: int, dst: str, dport: int,
                 count: int) -> None:
        """`count` datagrams of 64 B from the host, one 5-tuple (RoCEv2's path probes)."""
        send_udp(self.pid(host), src, sport, dst, dport, count)

    def nft_worker(self, node: str, stop: threading.Event, setup: str) -> NodeNft:
        """The node's nftables worker for the fault injector: a thread of this process in
        the node's namespace (the cluster mode's runs in its server's agent)."""
        return NodeNft(node, self.pid(node), stop, setup)

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Both ends of the link between nodes a and b administratively up or down (carrier
        loss seen from either side)."""
        for node, peer in ((a, b), (b, a)):
            port = self.plan.port_to(node, peer)
            handle = self.netlink(node)
            handle.ipr.link("set", index=handle.ifindex(port.ifname),
                            state="up" if up else "down")

    # ---- verification: every EV probed, every End SID's counter read before and after ----
    def probe_evs(self, job: ProbeJob, progress: Progress) -> ProbeOutcome:
        """Every EV of `job` probed from its source host, over this machine's cores."""
        return probe_all(job, progress)

    def end_sid_counters(self, progress: Progress) -> dict[tuple[str, IPv6Network], int]:
        """Packets through every router's End SIDs, read over this machine's cores (from
        the eBPF program's map where it stands in for seg6local)."""
        if self.end_sids is not None:
            return self.end_sids.router_counters(self.plan)
        return read_counters([(r, self.pid(r), self.ifindex[r]) for r in self.plan.routers],
                             progress)

    # ---- telemetry (from the sampler's thread) ----
    def sample_ports(self, queues: bool) -> dict[str, dict[str, PortSample]]:
        """Every node's port counters by node and interface name (port_counters.py), with
        the FIFOs' backlog and drops when `queues`; through the calling thread's sockets."""
        return {name: read_node_ports(self.pid(name), self.plan.ports(name),
                                      self._thread_netlink(name), self.queues, queues)
                for name in self.plan.nodes}

    # ---- the netlink part of faults (from the injector's thread) ----
    def _thread_netlink(self, name: str) -> NodeNetlink:
        """The calling thread's netlink socket in the node (a socket is not shared between
        threads); all are closed with the network."""
        handles = self._thread_sockets.__dict__.setdefault("handles", {})
        if name not in handles:
            handles[name] = NodeNetlink(self.pid(name), self.ifindex.get(name))
            self._all_sockets.append(handles[name])
        return handles[name]

    def set_routes(self, node: str, delete: list[str],
                   replace: list[tuple[str, list[tuple[str, str]]]]) -> None:
        """Plain routes withdrawn and replaced (the baseline's routing converging)."""
        self._thread_netlink(node).replace_plain_routes(delete, replace)

    def set_port_rate(self, port: Port, link: Link, rate_bps: int) -> None:
        """The port's shaper at a new rate (degrade), and its virtual queue's and monitor's."""
        handle = self._thread_netlink(port.node)
        shaping.set_port_rate(handle.ipr, handle.ifindex(port.ifname), rate_bps,
                              self.plan.scenario.fabric.mtu)
        self.set_queue_rate(port, link, rate_bps)

    def set_port_delay(self, port: Port, link: Link, delay_s: float | None) -> None:
        """A netem delay in place of the port's FIFO, or the FIFO back (None)."""
        handle = self._thread_netlink(port.node)
        shaping.set_port_delay(handle.ipr, handle.ifindex(port.ifname),
                               self.fifo_limit(port, link), delay_s,
                               self.plan.scenario.fabric.mtu)

    # ---- processes and files in nodes (host agents, iperf3, tcpdump) ----
    def node_path(self, node: str, local: Path) -> str:
        """Where a file that the run keeps at `local` (in its results) is written on the
        machine holding `node`: here, `local` itself (a server: its agent's folder)."""
        return str(local)

    def write_files(self, node: str, texts: dict[str, str]) -> None:
        """Files on the machine holding `node` (paths from `node_path`), each whole or not at
        all: an agent polling for its start time read an empty file and failed (seen once in
        the suite)."""
        for path, text in texts.items():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            files.write_text(Path(path), text)

    def spawn(self, node: str, key: str, argv: list[str], stdout: str,
              cwd: str | None = None) -> subprocess.Popen:
        """`argv` in the node (its output into the file `stdout`): a process object with
        `poll`, `wait`, `send_signal`, `terminate`, `kill`, `returncode`. `key` names it
        uniquely in the run (a server's agent keeps it by that key)."""
        Path(stdout).parent.mkdir(parents=True, exist_ok=True)
        with open(stdout, "wb") as fh:
            return self.node(node).popen(argv, stdout=fh, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=cwd)

    def read_files(self, wanted: list[tuple[str, str]]) -> dict[str, str | None]:
        """The text of small files (node, path), None where absent: agents' progress."""
        out: dict[str, str | None] = {}
        for _node, path in wanted:
            try:
                out[path] = Path(path).read_text()
            except OSError:
                out[path] = None
        return out

    def fetch(self, node: str, path: str, local: Path) -> None:
        """The file or folder `path` on the machine holding `node` copied to `local` in the
        results: here, where it already is."""

    def machine_of(self, node: str) -> str:
        """The machine holding `node` (a server's name in the cluster mode)."""
        return ""

    def cores(self, machine: str) -> int:
        return os.cpu_count() or 1

    def clock_offset(self, node: str) -> float:
        """Clock of the machine holding `node` minus this one's, s: 0, it is this one."""
        return 0.0

    # ---- the fidelity monitor ----
    def start_monitor(self) -> None:
        self.monitor = MachineMonitor(self.plan, set(self.plan.nodes))

    def stop_monitor(self) -> list[Machine]:
        """What every machine forwarding the fabric measured: here, this one."""
        if self.monitor is None:
            return []
        got, self.monitor = self.monitor.stop(), None
        return [Machine([], set(self.plan.nodes), got["ports"], got["unavailable"],
                        got["cpu_rows"], got["cores"], processes={"runner": got["cpu_rows"]})]

    def fifo_limit(self, port: Port, link: Link) -> int:
        return fifo_limit(self.plan, port, link)

    def set_queue_rate(self, port: Port, link: Link, rate_bps: int) -> None:
        """The rate a router port's virtual queue drains at, and the rate the fidelity monitor
        expects its dequeues at, after its shaper changed."""
        if self.monitor is not None:
            self.monitor.set_rate(port.ifindex, rate_bps)
        if self.queues is not None and self.plan.nodes[port.node].role != "host":
            self.queues.set_rate(port.ifindex, port_config(link, rate_bps))

    # ---- the end ----
    def close(self, on_step: Callable[[str], None] | None = None) -> int:
        """Tear down: close our sockets (they pin namespaces), kill every process in the
        run's namespaces, release Mininet's ptys. Returns processes killed."""
        if self._closed:
            return 0
        self._closed = True
        killed = self._close_nodes()
        self.registry.close()
        return killed

    def _close_nodes(self) -> int:
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        for handle in [*self._netlink.values(), *self._all_sockets]:
            handle.close()
        self._netlink.clear()
        self._all_sockets.clear()
        killed = cleanup.kill_namespaces(self.inodes)
        if self.queues is not None:
            self.queues.close()  # the program goes when its last port (namespace) is gone
        if self.end_sids is not None:
            self.end_sids.close()
            self.end_sids = None
        self.close_shells()
        return killed
