"""Which server each node runs on, which links cross between servers, and what they may carry.

Pure: the plan and the scenario's `cluster:` section in, a `Placement` out. The build makes a
veth of every link whose ends share a server and a VXLAN tunnel of every other one, so the
number of crossing links here is the number of tunnels, and their rates bound what the
underlay between two servers must carry.

Policies:
- `pod` keeps what talks most on one server. A pod is leaf j of every plane plus the hosts
  below it: host links never cross, and a host's traffic to another host of its pod never
  leaves the server. Pods go to servers in contiguous, balanced blocks. Spines are spread over
  the servers in turn (plane by plane), which balances the nodes; wherever a spine sits, its
  links to the leaves of other servers cross, so P x S x (L - pods on its server) links cross.
- `round_robin` puts node after node (hosts, then each plane's leaves and spines) on the next
  server, as Mininet's RoundRobinPlacer does: for contrast, since most links then cross.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from testbed.fabric.plan import FabricPlan, Link
from testbed.scenario.cluster import Cluster

ETHERNET_HEADER = 14  # the inner frame VXLAN carries: the fabric's MTU plus its Ethernet header


@dataclass(frozen=True)
class PairLoad:
    """What the tunnels between two servers may carry, each way."""

    servers: tuple[str, str]
    links: tuple[Link, ...]
    rate: int  # bit/s: the sum of the crossing links' rates, each way
    underlay_rate: int  # the same in underlay bits, full-size frames with VXLAN's headers


@dataclass(frozen=True)
class Placement:
    servers: tuple[str, ...]
    policy: str
    server_of: dict[str, str]
    crossing: tuple[Link, ...]
    vni: dict[str, int]  # crossing link name -> VNI
    underlay: dict[str, str]  # server -> underlay address
    pairs: tuple[PairLoad, ...] = field(default=())

    def nodes_on(self, server: str) -> tuple[str, ...]:
        return tuple(n for n, s in self.server_of.items() if s == server)

    def crosses(self, link: Link) -> bool:
        return self.server_of[link.lower.node] != self.server_of[link.upper.node]

    def describe(self, plan: FabricPlan) -> list[str]:
        """Lines a user reads before the build: nodes per server, what crosses, at what rate."""
        lines = []
        for server in self.servers:
            nodes = self.nodes_on(server)
            hosts = sum(plan.nodes[n].role == "host" for n in nodes)
            lines.append(f"{server} ({self.underlay[server]}): {len(nodes)} nodes ({hosts} "
                         f"hosts, {len(nodes) - hosts} routers)")
        lines.append(f"{len(self.crossing)} of {len(plan.links)} links cross between servers "
                     f"(VXLAN, {self.policy} placement)")
        for pair in self.pairs:
            lines.append(f"{pair.servers[0]}<->{pair.servers[1]}: {len(pair.links)} links, up "
                         f"to {_mbit(pair.rate)} each way ({_mbit(pair.underlay_rate)} on the "
                         f"underlay with VXLAN headers)")
        return lines


def _mbit(bps: int) -> str:
    return f"{bps / 1e6:,.1f} Mbit/s"


def _blocks(count: int, servers: int) -> list[int]:
    """Item i of `count` -> server, in contiguous blocks whose sizes differ by at most one."""
    return [i * servers // count for i in range(count)]


def place(plan: FabricPlan, cluster: Cluster) -> Placement:
    servers = cluster.server_names()
    n = len(servers)
    f = plan.scenario.fabric
    server_of: dict[str, str] = {}
    if cluster.placement == "pod":
        pod_server = _blocks(f.leaves_per_plane, n)
        for host in plan.hosts:
            server_of[host] = servers[pod_server[plan.leaf_index(host)]]
        for p in range(plan.planes):
            for j, leaf in enumerate(plan.leaves[p]):
                server_of[leaf] = servers[pod_server[j]]
            for s, spine in enumerate(plan.spines[p]):
                server_of[spine] = servers[(p * f.spines_per_plane + s) % n]
    else:
        order = list(plan.hosts) + [r for p in range(plan.planes)
                                    for r in plan.leaves[p] + plan.spines[p]]
        for i, name in enumerate(order):
            server_of[name] = servers[i % n]
    index = {link.name: k for k, link in enumerate(plan.links)}
    crossing = tuple(link for link in plan.links
                     if server_of[link.lower.node] != server_of[link.upper.node])
    # VNI from the link's place in the plan, not among the crossing ones: a link keeps its VNI
    # whatever the placement, so a capture on the underlay reads back to the link
    vni = {link.name: cluster.vni_base + index[link.name] for link in crossing}
    frame = f.mtu + ETHERNET_HEADER
    by_pair: dict[tuple[str, str], list[Link]] = {}
    for link in crossing:
        a, b = server_of[link.lower.node], server_of[link.upper.node]
        key = (a, b) if servers.index(a) < servers.index(b) else (b, a)
        by_pair.setdefault(key, []).append(link)
    pairs = tuple(
        PairLoad(key, tuple(links), sum(link.rate for link in links),
                 sum(link.rate for link in links) * (frame + cluster.overhead) // frame)
        for key, links in sorted(by_pair.items(), key=lambda kv: (servers.index(kv[0][0]),
                                                                  servers.index(kv[0][1]))))
    return Placement(tuple(servers), cluster.placement, server_of, crossing, vni,
                     cluster.underlays(), pairs)
