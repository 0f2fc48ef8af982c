"""The fabric plan: every node, port, link and address of a scenario, as plain data.

Pure: no root, no sockets. The build realizes exactly this plan and the verification checks the
network against it, so a unit test of the plan is a test of what will be on the wire.

Addressing (hex digits, so a packet capture reads back to fabric coordinates):
- uSID block of plane p: `fcbb:bb0p::/32` (32-bit locator block, 16-bit uSIDs: NEXT-C-SID);
- uN of host i: 0x0100+i; of leaf j in plane p: 0xd000+256p+j; of spine s: 0xe000+256p+s;
  node X's SID in plane p is `<block p>:<uN X>::/48` (seg6local End, next-csid flavor);
- host i's SRv6 address in plane p: `<block p>:<uN i>::` (where its uSID paths end);
- host i's plain address in plane p (RoCEv2 baseline, ECMP): `fd10:p:j::<uN i>`, j its leaf,
  aggregated per leaf as `fd10:p:j::/64`;
- link k of plane p: `fd20:p:k::/64`, `::1` on the lower end (host or leaf), `::2` on the upper;
  MACs `02:pp:kk:kk:00:01` and `...:02`, so neighbour entries are static (no ND during runs).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from ipaddress import IPv6Address, IPv6Interface, IPv6Network
from typing import Literal

from testbed.errors import ScenarioError
from testbed.scenario import Scenario
from testbed.scenario.red import OFF, RedProfile

HOST_USID_BASE = 0x0100
LEAF_USID_BASE = 0xD000
SPINE_USID_BASE = 0xE000
BLOCK_BITS = 32
USID_BITS = 16
MAX_USIDS = (128 - BLOCK_BITS) // USID_BITS
# Fabric ports get interface indexes from here on, two per link, distinct across namespaces
# (a fresh namespace numbers its own devices from 1: lo, then the End SID device).
IFINDEX_BASE = 1000

Role = Literal["host", "leaf", "spine"]


@dataclass(frozen=True)
class Node:
    name: str
    role: Role
    index: int  # host index, or leaf/spine index within its plane
    plane: int | None  # None for hosts: they sit in every plane
    usid: int


@dataclass(frozen=True)
class Port:
    node: str
    ifname: str
    address: IPv6Interface
    plane: int
    peer: str  # the node at the other end
    mac: str  # fixed, so neighbours can be static and captures readable
    ifindex: int  # distinct across the fabric: one eBPF map keyed by ifindex serves all ports


@dataclass(frozen=True)
class Link:
    """A point-to-point link; `lower` is the host (host links) or the leaf (fabric links)."""

    lower: Port
    upper: Port
    kind: Literal["host", "fabric"]
    plane: int
    rate: int  # bit/s
    buffer: int  # bytes
    ecn: RedProfile  # where router ports mark CE (red.OFF: never)
    trim: int  # queue bytes above which router ports trim MRC data; 0: off
    limit: int  # queue bytes above which router ports drop (lossless: count an overflow)
    lossless: bool  # router ports queue past the buffer (switch.lossless)

    @property
    def name(self) -> str:
        return f"{self.lower.node}-{self.upper.node}"


@cache
def block(plane: int) -> IPv6Network:
    return IPv6Network(((0xFCBBBB00 | plane) << (128 - BLOCK_BITS), BLOCK_BITS))


def usid_address(plane: int, usids: Sequence[int]) -> IPv6Address:
    """The destination address that carries `usids` in plane `plane`'s block, first hop first."""
    return _usid_address(plane, tuple(usids))


@lru_cache(maxsize=65536)  # verification asks for the same addresses many thousand times
def _usid_address(plane: int, usids: tuple[int, ...]) -> IPv6Address:
    if not 1 <= len(usids) <= MAX_USIDS:
        raise ValueError(f"{len(usids)} uSIDs: between 1 and {MAX_USIDS} fit in an address")
    value = int(block(plane).network_address)
    for position, usid in enumerate(usids):
        if not 0 < usid < 1 << USID_BITS:
            raise ValueError(f"uSID {usid:#x} is not a non-zero 16-bit value")
        value |= usid << (128 - BLOCK_BITS - USID_BITS * (position + 1))
    return IPv6Address(value)


@cache
def sid_prefix(plane: int, usid: int) -> IPv6Network:
    return IPv6Network((int(usid_address(plane, (usid,))), BLOCK_BITS + USID_BITS))


@dataclass(frozen=True)
class FabricPlan:
    scenario: Scenario
    nodes: dict[str, Node]
    links: tuple[Link, ...]
    hosts: tuple[str, ...]
    leaves: tuple[tuple[str, ...], ...]  # [plane][leaf]
    spines: tuple[tuple[str, ...], ...]  # [plane][spine]
    _ports: dict[str, tuple[Port, ...]] = field(repr=False)

    # ---- topology ----
    @property
    def planes(self) -> int:
        return self.scenario.fabric.planes

    @property
    def routers(self) -> tuple[str, ...]:
        return tuple(n for n, node in self.nodes.items() if node.role != "host")

    def ports(self, node: str) -> tuple[Port, ...]:
        return self._ports[node]

    def leaf_index(self, host: str) -> int:
        return self.nodes[host].index // self.scenario.fabric.hosts_per_leaf

    def leaf_of(self, host: str, plane: int) -> str:
        return self.leaves[plane][self.leaf_index(host)]

    def hosts_of_leaf(self, leaf: str) -> tuple[str, ...]:
        j = self.nodes[leaf].index
        per = self.scenario.fabric.hosts_per_leaf
        return self.hosts[j * per:(j + 1) * per]

    def port_to(self, node: str, peer: str) -> Port:
        for port in self._ports[node]:
            if port.peer == peer:
                return port
        raise KeyError(f"{node} has no link to {peer}")

    @cached_property
    def link_by_ports(self) -> dict[tuple[str, str], Link]:
        """(node, ifname) -> link, for telemetry and fault targeting."""
        table = {}
        for link in self.links:
            table[(link.lower.node, link.lower.ifname)] = link
            table[(link.upper.node, link.upper.ifname)] = link
        return table

    # ---- addresses ----
    def sid(self, node: str, plane: int) -> IPv6Network:
        return sid_prefix(plane, self.nodes[node].usid)

    def srv6_address(self, host: str, plane: int) -> IPv6Address:
        return usid_address(plane, (self.nodes[host].usid,))

    def plain_address(self, host: str, plane: int) -> IPv6Address:
        return IPv6Address(f"fd10:{plane:x}:{self.leaf_index(host):x}::{self.nodes[host].usid:x}")

    @staticmethod
    def leaf_subnet(plane: int, leaf_index: int) -> IPv6Network:
        return IPv6Network(f"fd10:{plane:x}:{leaf_index:x}::/64")

    @staticmethod
    def plain_plane(plane: int) -> IPv6Network:
        return IPv6Network(f"fd10:{plane:x}::/32")


def make_plan(scenario: Scenario) -> FabricPlan:
    """The plan a build realizes; refused while a link rate is still `auto`."""
    if scenario.auto_links():  # every build plans first: none runs at the placeholder rate
        raise ScenarioError(
            f"{scenario.name}: {', '.join(scenario.auto_links())} rate is auto and has not been "
            f"chosen yet", "run it with `mrc-testbed run` (which chooses it), or give the "
                           "scenario's with_rate(budget.choose_rate(...).rate) to scripts")
    return layout(scenario)


def layout(scenario: Scenario) -> FabricPlan:
    """The fabric's nodes, ports and links, named and wired as the plan has them, whatever the
    rate: for checks of names alone (the fault timeline's targets) before `rate: auto` is
    chosen. With `rate: auto` its links carry the placeholder rate the scenario was validated
    at, so nothing that reads a rate may use it: builds use `make_plan`."""
    f, naming = scenario.fabric, scenario.naming
    nodes: dict[str, Node] = {}
    hosts = tuple(naming.host_name(i) for i in range(f.host_count))
    for i, name in enumerate(hosts):
        nodes[name] = Node(name, "host", i, None, HOST_USID_BASE + i)
    leaves, spines = [], []
    for p in range(f.planes):
        leaves.append(tuple(naming.leaf_name(p, j) for j in range(f.leaves_per_plane)))
        spines.append(tuple(naming.spine_name(p, s) for s in range(f.spines_per_plane)))
        for j, name in enumerate(leaves[p]):
            nodes[name] = Node(name, "leaf", j, p, LEAF_USID_BASE + 256 * p + j)
        for s, name in enumerate(spines[p]):
            nodes[name] = Node(name, "spine", s, p, SPINE_USID_BASE + 256 * p + s)

    ports: dict[str, list[Port]] = {name: [] for name in nodes}
    links: list[Link] = []

    def connect(lower: str, upper: str, plane: int, k: int,
                kind: Literal["host", "fabric"]) -> None:
        subnet = f"fd20:{plane:x}:{k:x}::"
        mac = f"02:{plane:02x}:{k >> 8:02x}:{k & 0xff:02x}:00:0"
        index = IFINDEX_BASE + 2 * len(links)
        lp = Port(lower, f"{lower}-eth{len(ports[lower])}", IPv6Interface(f"{subnet}1/64"),
                  plane, upper, mac + "1", index)
        up = Port(upper, f"{upper}-eth{len(ports[upper])}", IPv6Interface(f"{subnet}2/64"),
                  plane, lower, mac + "2", index + 1)
        ports[lower].append(lp)
        ports[upper].append(up)
        cls = f.host_link if kind == "host" else f.fabric_link
        links.append(Link(lp, up, kind, plane, cls.rate, cls.buffer,
                          cls.ecn() if scenario.switch.ecn else OFF,
                          cls.trim() if scenario.switch.trimming else 0,
                          scenario.queue_limit(cls), scenario.switch.lossless))

    # Host port p is plane p; leaf ports: its hosts first, then its spines; spine port j: leaf j.
    for p in range(f.planes):
        for i, host in enumerate(hosts):
            connect(host, leaves[p][i // f.hosts_per_leaf], p, i, "host")
    for p in range(f.planes):
        for j, leaf in enumerate(leaves[p]):
            for s, spine in enumerate(spines[p]):
                connect(leaf, spine, p, f.host_count + j * f.spines_per_plane + s, "fabric")
    return FabricPlan(scenario, nodes, tuple(links), hosts, tuple(leaves), tuple(spines),
                      {n: tuple(p) for n, p in ports.items()})
