"""The fabric spread over servers: Mininet's cluster mode, with VXLAN links between servers.

The same `FabricNetwork`, three differences (Mininet's cluster edition, `examples/cluster.py`,
has the same split: `RemoteMixin` nodes, `RemoteLink` tunnels, a placer):
- each node's shell starts on its server (`placement.server_of`), through the server's command
  prefix: `ssh root@server` as RemoteMixin does, or a plain namespace switch for fast tests;
- a link whose ends share a server is a veth made on that server; every other link is a pair
  of VXLAN devices (`VxlanLink`, one VNI per link, testbed/kernel/vxlan.py), each made on its
  own server over netlink and bound to that server's underlay address;
- the servers come first and go last, and their underlay is measured before the fabric is
  built.
Everything after the links (addresses, routes, End SIDs, htb and the eBPF queue on every port,
the tunnels' ends included; verification, faults, telemetry, agents) is the single-machine
code, unchanged: a tunnel end is a port like any other.

Scope today: emulated servers (testbed/emulation/servers.py), which share this machine's
kernel. The per-node configuration after the links, verification, telemetry, faults and the
agents still reach nodes through their pids from this process, which only works when the
servers share a kernel; real servers refuse to run (see `preflight`) until that work runs on
each server.
"""
from __future__ import annotations

import socket

from pyroute2 import IPRoute
from pyroute2.netlink import NETLINK_ROUTE

from testbed.emulation.network import FabricNetwork, NetlinkVeth
from testbed.emulation.servers import EmulatedServers, UnderlayPath, require_tools
from testbed.errors import EnvironmentProblem
from testbed.fabric.placement import Placement, place
from testbed.fabric.plan import FabricPlan, Link, Port
from testbed.kernel import netns, vxlan
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import RunRegistry
from testbed.scenario.cluster import Cluster


def preflight(cluster: Cluster) -> None:
    """What the machine needs before servers are made; the underlay is measured after."""
    if cluster.emulated is None:
        raise EnvironmentProblem(
            "cluster.servers: real servers are not supported yet. The build (placement, VXLAN "
            "links, node shells over ssh) is ready, but node configuration, verification, "
            "telemetry, faults and the agents still reach nodes from this machine's kernel",
            "use `cluster: {emulated: N}` to run the cluster mode on this machine")
    require_tools()
    missing = vxlan.probe()
    if missing:
        raise EnvironmentProblem(f"cluster links need VXLAN: {missing}",
                                 "load the vxlan module (`modprobe vxlan`)")


class VxlanLink(NetlinkVeth):
    """Mininet's RemoteLink for this kernel: a link between nodes on two servers, made of
    one VXLAN device per end (each created on its own server, straight into its node)."""

    def __init__(self, node1, node2, ends: tuple[vxlan.TunnelEnd, vxlan.TunnelEnd],
                 servers: tuple[IPRoute, IPRoute], **params) -> None:
        self._ends, self._servers = ends, servers
        super().__init__(node1, node2, **params)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None,
                     node2=None, deleteIntfs=True, **_kw):  # Mininet's name
        for end, rtnl in zip(self._ends, self._servers):
            rtnl.nlm_request_batch([vxlan.new_link_message(end)])
            vxlan.offloads_off(end.node_pid, end.ifname)


class ClusterNetwork(FabricNetwork):
    """Build with `add_servers()` then `build()`'s usual phases; `close()` ends the servers too."""

    def __init__(self, plan: FabricPlan, registry: RunRegistry, progress: Progress) -> None:
        super().__init__(plan, registry, progress)
        cluster = plan.scenario.cluster
        assert cluster is not None
        self.cluster = cluster
        self.placement: Placement = place(plan, cluster)
        self.servers = EmulatedServers(cluster, plan.scenario.fabric.mtu, registry)
        self.underlay: list[UnderlayPath] = []
        self._server_rtnl: dict[str, IPRoute] = {}

    @staticmethod
    def placement_lines(plan: FabricPlan) -> list[str]:
        """What the user reads before the build: nodes per server, what crosses, its rate."""
        assert plan.scenario.cluster is not None
        return place(plan, plan.scenario.cluster).describe(plan)

    def facts(self) -> dict:
        """The cluster as meta.json records it: servers, placement, tunnels, the underlay."""
        pl = self.placement
        return {
            "servers": {s: {"underlay": pl.underlay[s], "namespace": self.servers.netns[s],
                            "nodes": list(pl.nodes_on(s))} for s in pl.servers},
            "emulated": True, "placement": pl.policy,
            "node_start": "ssh" if self.cluster.ssh_transport else "nsenter",
            "underlay_mtu": self.servers.mtu, "required_mtu": self.servers.required_mtu,
            "crossing_links": {link.name: {"vni": pl.vni[link.name], "rate": link.rate}
                               for link in pl.crossing},
            "pairs": [{"servers": list(p.servers), "links": len(p.links), "rate": p.rate,
                       "underlay_rate": p.underlay_rate} for p in pl.pairs],
            "underlay_rtt_ms": {f"{p.src}->{p.dst}": p.rtt_ms for p in self.underlay},
        }

    def underlay_counters(self) -> dict[str, tuple[int, ...]]:
        return self.servers.underlay_counters()

    @staticmethod
    def underlay_traffic(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]],
                         seconds: float) -> dict[str, dict]:
        """What each server sent and received on the underlay between two counter reads:
        the VXLAN tunnels' packets (and, here, nothing else: sshd idles during a run)."""
        out = {}
        for server, now in after.items():
            then = before[server]
            d = [b - a for a, b in zip(then, now)]
            out[server] = {"tx_bytes": d[4], "tx_packets": d[5], "rx_bytes": d[0],
                           "rx_packets": d[1], "errors": d[2] + d[6], "drops": d[3] + d[7],
                           "tx_mbit_s": round(d[4] * 8 / seconds / 1e6, 3) if seconds else None}
        return out

    def add_servers(self) -> str:
        """Make the emulated servers and measure their underlay; a summary line."""
        self.servers.create()
        self.underlay = self.servers.check_underlay()
        worst = max(p.rtt_ms for p in self.underlay)
        return (f"{len(self.servers.names)} emulated servers (namespace + sshd), underlay MTU "
                f"{self.servers.mtu} carries a {self.servers.required_mtu} B tunnel packet "
                f"unfragmented between every pair, RTT <= {worst:.3f} ms")

    def node_params(self, name: str) -> dict:
        server = self.placement.server_of[name]
        prefix = self.servers.ssh(server, tty=True) if self.cluster.ssh_transport \
            else self.servers.prefix(server)
        return {"shell_prefix": prefix, "server": server}

    def _rtnl(self, server: str) -> IPRoute:
        """A netlink socket on the server (in its namespace): what is made there goes there."""
        if server not in self._server_rtnl:
            sock = netns.socket_at(self.servers.path(server), socket.AF_NETLINK,
                                   socket.SOCK_DGRAM, NETLINK_ROUTE)
            self._server_rtnl[server] = IPRoute(fileno=sock.detach())
        return self._server_rtnl[server]

    def _end(self, port: Port, peer: Port, vni: int) -> vxlan.TunnelEnd:
        server = self.placement.server_of[port.node]
        remote = self.placement.server_of[peer.node]
        return vxlan.TunnelEnd(port.ifname, port.ifindex, port.mac, self.pid(port.node), vni,
                               self.placement.underlay[server], self.placement.underlay[remote],
                               self.cluster.vxlan_port, self.plan.scenario.fabric.mtu)

    def add_links(self) -> None:
        mtu = self.plan.scenario.fabric.mtu
        try:
            for link in self.progress.bar(self.plan.links, len(self.plan.links), "links"):
                self._add_link(link, mtu)
        finally:
            for rtnl in self._server_rtnl.values():
                rtnl.close()
            self._server_rtnl.clear()

    def _add_link(self, link: Link, mtu: int) -> None:
        a, b = link.lower, link.upper
        server_a = self.placement.server_of[a.node]
        server_b = self.placement.server_of[b.node]
        if server_a == server_b:
            self.net.addLink(self.net[a.node], self.net[b.node], cls=NetlinkVeth,
                             rtnl=self._rtnl(server_a), mtu=mtu, ports=(a, b),
                             intfName1=a.ifname, intfName2=b.ifname)
            return
        vni = self.placement.vni[link.name]
        self.net.addLink(self.net[a.node], self.net[b.node], cls=VxlanLink,
                         ends=(self._end(a, b, vni), self._end(b, a, vni)),
                         servers=(self._rtnl(server_a), self._rtnl(server_b)),
                         rtnl=None, mtu=mtu, ports=(a, b),
                         intfName1=a.ifname, intfName2=b.ifname)

    def close(self, on_step=None) -> int:
        """Nodes first (their tunnels go with their namespaces), then the servers."""
        if self._closed:
            return 0
        self._closed = True
        for rtnl in self._server_rtnl.values():
            rtnl.close()
        killed = self._close_nodes()
        try:
            killed += self.servers.remove()
        finally:
            self.registry.close()
        return killed


def make_network(plan: FabricPlan, registry: RunRegistry,
                 progress: Progress) -> FabricNetwork:
    """The network a scenario asks for: on this machine, or over its `cluster:` servers."""
    if plan.scenario.cluster is not None:
        return ClusterNetwork(plan, registry, progress)
    return FabricNetwork(plan, registry, progress)
