"""What each node's kernel must hold: addresses, routes and End SIDs (pure, from the plan).

Two kinds of routes live side by side and never share a prefix:
- `srv6`: static routes toward uSID prefixes (`fcbb:bb0p:<uN>::/48`), used by MRC's steered
  packets. Nothing reroutes them, as in production MRC where BGP is off.
- `plain`: routes toward plain host addresses (`fd10:...`), ECMP across spines with an L4 hash,
  used by the RoCEv2 baseline; the fault timeline may withdraw their next hops like BGP would.
"""
from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv6Address, IPv6Interface, IPv6Network
from typing import Literal

from testbed.fabric.plan import FabricPlan, block


@dataclass(frozen=True)
class Nexthop:
    gateway: IPv6Address
    ifname: str


@dataclass(frozen=True)
class Route:
    dst: IPv6Network
    nexthops: tuple[Nexthop, ...]  # more than one: ECMP
    kind: Literal["srv6", "plain"]
    # The source address of what a host sends this way (RTA_PREFSRC). MRC sends every EV from
    # one unbound socket, and without it the kernel chose the source per datagram, comparing
    # every address of the port (RFC 6724): 5% of the machine's CPU at 32 hosts (perf). With
    # it, the plane's own uSID address, which that choice picked anyway (longest match).
    source: IPv6Address | None = None


@dataclass(frozen=True)
class NodeConfig:
    name: str
    router: bool
    addresses: tuple[tuple[str, IPv6Interface], ...]  # (ifname, address)
    routes: tuple[Route, ...]
    end_sids: tuple[IPv6Network, ...]  # seg6local End, next-csid flavor
    neighbors: tuple[tuple[str, IPv6Address, str], ...]  # (ifname, peer address, peer MAC)


def _via(plan: FabricPlan, node: str, peer: str) -> Nexthop:
    """Next hop from node to its neighbour peer: the peer's address on their shared link."""
    return Nexthop(plan.port_to(peer, node).address.ip, plan.port_to(node, peer).ifname)


def node_config(plan: FabricPlan, name: str, failed: frozenset[str] = frozenset()) -> NodeConfig:
    """The node's state; `failed` names links routing has converged around: the plain routes
    (the baseline's, as BGP would leave them) lose every next hop that crosses one. The uSID
    routes never change: MRC's paths are static."""
    node = plan.nodes[name]

    def ok(a: str, b: str) -> bool:
        return f"{a}-{b}" not in failed and f"{b}-{a}" not in failed

    addresses = [(port.ifname, port.address) for port in plan.ports(name)]
    neighbors = []
    for port in plan.ports(name):
        peer = plan.port_to(port.peer, name)
        neighbors.append((port.ifname, peer.address.ip, peer.mac))
    routes: list[Route] = []
    if node.role == "host":
        for p in range(plan.planes):
            port = plan.ports(name)[p]
            addresses.append((port.ifname, IPv6Interface(plan.srv6_address(name, p))))
            addresses.append((port.ifname, IPv6Interface(plan.plain_address(name, p))))
            up = _via(plan, name, port.peer)
            routes.append(Route(block(p), (up,), "srv6", plan.srv6_address(name, p)))
            if ok(name, port.peer):
                routes.append(Route(plan.plain_plane(p), (up,), "plain"))
        sids = tuple(plan.sid(name, p) for p in range(plan.planes))
        return NodeConfig(name, False, tuple(addresses), tuple(routes), sids, tuple(neighbors))

    plane = node.plane
    assert plane is not None  # routers belong to one plane
    p = plane
    if node.role == "leaf":
        for spine in plan.spines[p]:
            routes.append(Route(plan.sid(spine, p), (_via(plan, name, spine),), "srv6"))
        for host in plan.hosts_of_leaf(name):
            down = _via(plan, name, host)
            routes.append(Route(plan.sid(host, p), (down,), "srv6"))
            if ok(name, host):
                routes.append(Route(IPv6Network(plan.plain_address(host, p)), (down,),
                                    "plain"))
        for j, leaf in enumerate(plan.leaves[p]):
            ups = tuple(_via(plan, name, spine) for spine in plan.spines[p]
                        if ok(name, spine) and ok(leaf, spine))
            if leaf != name and ups:
                routes.append(Route(plan.leaf_subnet(p, j), ups, "plain"))
    else:
        for j, leaf in enumerate(plan.leaves[p]):
            down = _via(plan, name, leaf)
            routes.append(Route(plan.sid(leaf, p), (down,), "srv6"))
            if ok(leaf, name):
                routes.append(Route(plan.leaf_subnet(p, j), (down,), "plain"))
    return NodeConfig(name, True, tuple(addresses), tuple(routes), (plan.sid(name, p),),
                      tuple(neighbors))


def node_configs(plan: FabricPlan) -> dict[str, NodeConfig]:
    return {name: node_config(plan, name) for name in plan.nodes}
