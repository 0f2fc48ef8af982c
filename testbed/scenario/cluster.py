"""The `cluster:` section: one scenario spread over several Linux servers (pure schema).

Absent, the fabric is built on this machine as always. Present, it names the servers and how
nodes are placed on them; links between nodes on two servers become VXLAN tunnels over the
servers' underlay network (testbed/fabric/placement.py plans which, testbed/cluster/network.py
builds them, one server agent per server, over ssh, doing each server's share). For tests
and demos, `emulated: N` makes N servers on this machine, each a network namespace with its
own sshd, joined by a veth underlay.

What needs the fabric (enough pods for the servers, VNIs for every crossing link, an underlay
MTU that carries the fabric's frames) is checked in `check`, called from the scenario's own
validation, so a bad section is refused before anything is built.
"""
from __future__ import annotations

from ipaddress import IPv6Address, ip_address
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_SERVERS = 16
MAX_EMULATED = 4  # each emulated server is a namespace with an sshd: a handful fit 2 cores
MAX_VNI = (1 << 24) - 1
VXLAN_OVERHEAD_IPV4 = 50  # outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8
VXLAN_OVERHEAD_IPV6 = 70  # outer Ethernet 14 + IPv6 40 + UDP 8 + VXLAN 8
SERVER_NAME_PATTERN = r"^[a-z][a-z0-9]{0,7}$"
SSH_PATTERN = r"^([A-Za-z0-9._-]+@)?[A-Za-z0-9.:_-]+$"
EMULATED_UNDERLAY = "10.254.{}.{}"  # the emulated underlay: private to the servers' namespaces


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Server(_Strict):
    """A real server: how to reach it over ssh, and its underlay address (where its VXLAN
    tunnels start and end)."""

    name: str = Field(pattern=SERVER_NAME_PATTERN,
                      description="1 to 8 lowercase letters or digits, a letter first")
    ssh: str = Field(pattern=SSH_PATTERN,
                     description="ssh destination, e.g. root@10.0.0.1 (key-based, as root)")
    underlay: str = Field(max_length=45,
                          description="this server's address on the underlay network")

    @field_validator("underlay")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            address = ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IPv4 or IPv6 address") from None
        if address.is_loopback or address.is_multicast or address.is_unspecified:
            raise ValueError(f"{value} cannot carry tunnels between servers "
                             f"(loopback, multicast or unspecified)")
        return str(address)


class EmulatedServer:
    """An emulated server's name and underlay address (planned, not written in the file)."""

    def __init__(self, index: int) -> None:
        self.name = f"srv{index}"
        self.ssh = "emulated"
        self.underlay = EMULATED_UNDERLAY.format(0, index + 1)


class Cluster(_Strict):
    """Servers and placement. Exactly one of `servers` (real) or `emulated` (this machine)."""

    servers: list[Server] = Field(default_factory=list, max_length=MAX_SERVERS,
                                  description="real servers, reached over ssh as root")
    emulated: int | None = Field(None, ge=2, le=MAX_EMULATED,
                                 description="this many emulated servers on this machine "
                                             "(namespaces with their own sshd), for tests")
    placement: Literal["pod", "round_robin"] = Field(
        "pod", description="pod: leaf j of every plane and its hosts on one server, spines "
                           "spread, only leaf-spine links cross; round_robin: node after node "
                           "in turn (Mininet's RoundRobinPlacer), for contrast")
    underlay_mtu: int | None = Field(
        None, ge=1280, le=65535,
        description="emulated servers only: MTU of the emulated underlay; default the fabric "
                    "MTU plus VXLAN's overhead. Real servers' underlay MTU is measured")
    vni_base: int = Field(10_000, ge=1, le=MAX_VNI,
                          description="VNI of the first crossing link; one VNI per link")
    vxlan_port: int = Field(4789, ge=1, le=65535, description="UDP port of the tunnels")
    ssh_transport: bool = Field(
        False, description="emulated servers only: start node shells through each server's "
                           "sshd (as on real servers) instead of `ip netns exec`; the server "
                           "agents always start over ssh")

    @model_validator(mode="after")
    def _one_kind(self) -> Cluster:
        if (self.emulated is None) == (not self.servers):
            raise ValueError("give either servers (real, over ssh) or emulated: N (this "
                             "machine), not both and not neither")
        if self.servers:
            if not 2 <= len(self.servers) <= MAX_SERVERS:
                raise ValueError(f"{len(self.servers)} servers: between 2 and {MAX_SERVERS}")
            for key in ("name", "ssh", "underlay"):
                values = [getattr(s, key) for s in self.servers]
                twice = sorted({v for v in values if values.count(v) > 1})
                if twice:
                    raise ValueError(f"servers: {key} {', '.join(twice)} given twice; each "
                                     f"server needs its own")
            families = {type(ip_address(s.underlay)) for s in self.servers}
            if len(families) > 1:
                raise ValueError("servers: underlay addresses mix IPv4 and IPv6; a tunnel "
                                 "joins two addresses of one family")
            if self.underlay_mtu is not None:
                raise ValueError("underlay_mtu is for emulated servers; a real underlay's MTU "
                                 "is read from each server (raise it there)")
            if self.ssh_transport:
                raise ValueError("ssh_transport is for emulated servers; real servers are "
                                 "always reached over ssh")
        return self

    def server_names(self) -> list[str]:
        if self.emulated is not None:
            return [EmulatedServer(i).name for i in range(self.emulated)]
        return [s.name for s in self.servers]

    def underlays(self) -> dict[str, str]:
        """Server name -> underlay address."""
        if self.emulated is not None:
            return {e.name: e.underlay for e in map(EmulatedServer, range(self.emulated))}
        return {s.name: s.underlay for s in self.servers}

    @property
    def overhead(self) -> int:
        """Bytes VXLAN adds to a fabric frame's IP MTU on the underlay."""
        first = next(iter(self.underlays().values()))
        return (VXLAN_OVERHEAD_IPV6 if isinstance(ip_address(first), IPv6Address)
                else VXLAN_OVERHEAD_IPV4)

    def required_mtu(self, fabric_mtu: int) -> int:
        """Underlay MTU that carries a full fabric frame in one packet (no fragmentation)."""
        return fabric_mtu + self.overhead

    def emulated_mtu(self, fabric_mtu: int) -> int:
        return (self.underlay_mtu if self.underlay_mtu is not None else
                self.required_mtu(fabric_mtu))


def check(cluster: Cluster, leaves_per_plane: int, link_count: int) -> None:
    """What the section needs from the fabric; ValueError naming the fix. (The underlay MTU is
    checked in preflight, on the real devices, with the exact number.)"""
    servers = len(cluster.server_names())
    if cluster.placement == "pod" and leaves_per_plane < servers:
        raise ValueError(
            f"cluster: placement pod puts whole pods (leaf j of every plane and its hosts) on "
            f"servers, and {leaves_per_plane} leaves per plane cannot fill {servers} servers; "
            f"use at most {leaves_per_plane} servers or more leaves")
    if cluster.vni_base + link_count - 1 > MAX_VNI:
        raise ValueError(f"cluster.vni_base {cluster.vni_base} + {link_count} links exceeds "
                         f"the largest VNI {MAX_VNI}; lower vni_base")
