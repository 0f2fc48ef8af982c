"""Latency along a path: one-way link latency, round trip and bandwidth-delay product (pure).

Every link adds `fabric.hop_latency` (a switch plus its cable) and each end host's NIC adds
`fabric.nic_latency`, both in the scenario's frame (testbed/fabric/frame.py). The emulated
links (veth pairs) have none of their own. By default (`fabric.latency_by: agents`) the agents'
receive path holds each datagram from a peer for its path's one-way latency (`agent_latency`,
the agent config's PeerConfig.latency); with `netem`, each link delays what it carries
(`port_delay`, applied by testbed/kernel/link_delay.py) and the agents hold nothing. The round
trip adds the store-and-forward serialization of a data packet and its ACK on every link, and
the BDP in packets is what a sender at line rate has in flight over it: the number a dilated
emulation must keep (the manual's Fidelity page), the same in both frames.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from testbed.fabric.frame import Frame
from testbed.fabric.paths import EV, evs
from testbed.fabric.plan import FabricPlan, Port
from testbed.scenario import Scenario
from testbed.scenario.units import format_rate, format_time


@dataclass(frozen=True)
class PathShape:
    """The links a path crosses, by class (their rates differ)."""

    host_links: int  # links with a host at one end: the first and the last
    fabric_links: int  # leaf-spine links

    @property
    def links(self) -> int:
        return self.host_links + self.fabric_links

    @classmethod
    def of(cls, plan: FabricPlan, ev: EV) -> PathShape:
        """The shape of the path an EV names, from its hops in the plan."""
        hosts = set(plan.hosts)
        pairs = ev.directed_links()
        to_host = sum(1 for a, b in pairs if a in hosts or b in hosts)
        return cls(to_host, len(pairs) - to_host)


ACROSS_A_SPINE = PathShape(host_links=2, fabric_links=2)  # host-leaf-spine-leaf-host


def one_way_latency(scenario: Scenario, shape: PathShape) -> float:
    """Emulated seconds a datagram spends in link and NIC latency along `shape`: every link's
    hop latency and both ends' NIC latency (queues and serialization excluded)."""
    frame = Frame.of(scenario)
    return shape.links * frame.hop_latency(scenario) + 2 * frame.nic_latency(scenario)


def arrival_delay(scenario: Scenario, shape: PathShape) -> float:
    """Emulated seconds from a message's last byte leaving its sender to its arriving along
    `shape`, queues empty: the path's latency and one full data packet's store-and-forward on
    every link after the first."""
    f = scenario.fabric
    bits = (scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD) * 8
    forward = ((shape.host_links - 1) * bits / f.host_link.rate
               + shape.fabric_links * bits / f.fabric_link.rate)
    return one_way_latency(scenario, shape) + forward


def round_trip(scenario: Scenario, shape: PathShape) -> float:
    """Emulated seconds of a round trip along `shape` with every queue empty: each
    store-and-forward link serializes a full data packet one way and its ACK the other, and
    the latency is crossed both ways."""
    f = scenario.fabric
    bits = (scenario.qp.mss + 2 * (HEADER_SIZE + FRAME_OVERHEAD)) * 8  # data out, ACK back
    serialization = (shape.host_links * bits / f.host_link.rate
                     + shape.fabric_links * bits / f.fabric_link.rate)
    return serialization + 2 * one_way_latency(scenario, shape)


def bdp_packets(scenario: Scenario, shape: PathShape) -> float:
    """Full data packets a sender at the host link's line rate has in flight over a round
    trip of `shape`: the same number in the real frame and the emulated one."""
    packet_bits = (scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD) * 8
    return round_trip(scenario, shape) * scenario.fabric.host_link.rate / packet_bits


def peer_latency(plan: FabricPlan, src: str, dst: str) -> float:
    """The one-way latency (emulated seconds) of a datagram between two hosts: of their
    longest path (in a two-tier Clos every path between two hosts is equally long)."""
    return max(one_way_latency(plan.scenario, PathShape.of(plan, e)) for e in evs(plan, src, dst))


def agent_latency(plan: FabricPlan, src: str, dst: str) -> float:
    """How long `dst`'s agent holds a datagram from `src` (emulated seconds): the path's
    one-way latency, or nothing where the links delay it themselves (latency_by: netem)."""
    return 0.0 if plan.scenario.fabric.latency_by == "netem" else peer_latency(plan, src, dst)


DELAY_IFINDEX_OFFSET = 1 << 20  # a port's delay device: its index plus this, fabric-wide distinct
SMALLEST_FRAME = 64  # bytes: the shortest frame a link carries (an Ethernet minimum)
DELAY_SLACK = 64  # packets a delay holds beyond what its link can carry in flight


@dataclass(frozen=True)
class PortDelay:
    """The latency of the link arriving at one port, applied after the port has received the
    packet (testbed/kernel/link_delay.py): a device of its own (index, name) holding every
    packet for `seconds` (emulated), at most `limit` packets at once."""

    ifindex: int
    ifname: str
    seconds: float
    limit: int


def port_delay(plan: FabricPlan, port: Port) -> PortDelay | None:
    """The delay on the link arriving at `port` with latency_by: netem (None otherwise, or
    where the latency is 0). A link carries its hop latency; a host link also one NIC's
    latency each way (the sender's going up, the receiver's coming down), so a path's delays
    add up to its `one_way_latency`. The limit holds everything the link can have in flight,
    in its smallest frames."""
    sc = plan.scenario
    if sc.fabric.latency_by != "netem":
        return None
    link = plan.link_by_ports[(port.node, port.ifname)]
    frame = Frame.of(sc)
    seconds = frame.hop_latency(sc) + (frame.nic_latency(sc) if link.kind == "host" else 0.0)
    if seconds <= 0:
        return None
    in_flight = math.ceil(seconds * link.rate / 8 / SMALLEST_FRAME)
    index = port.ifindex + DELAY_IFINDEX_OFFSET
    return PortDelay(index, f"lat{port.ifindex}", seconds, in_flight + DELAY_SLACK)


def path_shapes(plan: FabricPlan) -> dict[str, PathShape]:
    """Each kind of path the fabric has between two hosts, named: between hosts of one leaf
    (where a leaf holds two) and across a spine."""
    out: dict[str, PathShape] = {}
    for src in plan.hosts:
        for dst in plan.hosts:
            if src == dst:
                continue
            kind = ("same leaf" if plan.leaf_index(src) == plan.leaf_index(dst)
                    else "across a spine")
            if kind not in out:
                out[kind] = PathShape.of(plan, evs(plan, src, dst)[0])
        if len(out) == 2:
            break
    return dict(sorted(out.items(), key=lambda kv: kv[1].links))


def lines(plan: FabricPlan) -> list[str]:
    """The links' rates and latency and each kind of path's round trip and BDP, emulated with
    the real fabric's beside (where the scenario has one), for `validate`."""
    sc = plan.scenario
    f, frame = sc.fabric, Frame.of(sc)

    def both(seconds: float) -> str:
        real = f" ({format_time(frame.in_real(seconds))} real)" if frame.real else ""
        return f"{format_time(seconds)}{real}"
    by = ("held by the receiving agents" if f.latency_by == "agents"
          else "delayed by netem on every link")
    out = [f"emulated links: host {format_rate(f.host_link.rate)}, fabric "
           f"{format_rate(f.fabric_link.rate)}; latency {both(frame.hop_latency(sc))} a link, "
           f"{both(frame.nic_latency(sc))} a NIC, {by}"]
    for name, shape in path_shapes(plan).items():
        out.append(f"path {name}: {shape.links} links, one way {both(one_way_latency(sc, shape))}"
                   f", round trip {both(round_trip(sc, shape))}, BDP "
                   f"{bdp_packets(sc, shape):.1f} packets ({sc.qp.mss} B payloads)")
    return out
