"""A pyroute2 handle inside one node's namespace, and the routing state it installs there.

The whole node is configured over one netlink socket: interfaces up, addresses, static
neighbours, routes (ECMP where the plan says so), End SIDs, and the shaper of every port.
Messages are pyroute2's own classes, built here and sent in batches: one request/response
round trip through pyroute2's asyncio core per message was most of the build time.
"""
from __future__ import annotations

import socket
from ipaddress import IPv6Address, IPv6Interface, IPv6Network
from typing import NamedTuple

from pyroute2 import IPRoute
from pyroute2.netlink import (
    NETLINK_ROUTE,
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_EXCL,
    NLM_F_REQUEST,
)
from pyroute2.netlink.rtnl import RTM_NEWADDR, RTM_NEWLINK, RTM_NEWNEIGH, RTM_NEWROUTE
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import IFF_UP, ifinfmsg
from pyroute2.netlink.rtnl.ndmsg import ndmsg
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from testbed.fabric.latency import PortDelay
from testbed.fabric.plan import BLOCK_BITS, USID_BITS, Port
from testbed.fabric.routes import NodeConfig, Route
from testbed.kernel import fabric_queue, link_delay, netns, seg6local, shaping, usid_end
from testbed.kernel.qdisc_stats import QueueStats

SOL_NETLINK = 270
NETLINK_GET_STRICT_CHK = 12
IFA_F_NODAD = 0x02
NUD_PERMANENT = 0x80
RTPROT_STATIC = 4
RTPROT_BGP = 186  # shown as "proto bgp": the routes the baseline's routing model may withdraw
SID_DEVICE = "sid0"


def add_sid_device(ipr) -> int:
    """The device End SIDs hang off, and its index.

    Why a device of its own: IPv6 turns a route via `lo` into a reject route (it would loop),
    so `dev lo` End SIDs silently drop every packet; and a SID on a fabric port would vanish
    when a fault takes that port down. `dummy` is what one would use, but it is missing on the
    project's kernel; an ifb device (present here and on stock kernels) is up, has carrier, and
    is never touched by faults.
    """
    ipr.link("add", ifname=SID_DEVICE, kind="ifb")
    index = ipr.link_lookup(ifname=SID_DEVICE)[0]
    ipr.link("set", index=index, state="up")
    return index


class PortSetup(NamedTuple):
    """A port as its node's configuration makes it: its line rate (bit/s), the bytes of the
    FIFO behind its shaper, and the delay of the link arriving at it (latency_by: netem)."""

    port: Port
    rate: int
    buffer: int
    delay: PortDelay | None


_NEW = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL


def _link_up(index: int) -> ifinfmsg:
    msg = ifinfmsg()
    msg["family"] = socket.AF_UNSPEC
    msg["index"] = index
    msg["flags"] = msg["change"] = IFF_UP
    msg["header"]["type"] = RTM_NEWLINK
    msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK
    return msg


def _address(index: int, address: IPv6Interface) -> ifaddrmsg:
    msg = ifaddrmsg()
    msg["family"] = socket.AF_INET6
    msg["prefixlen"] = address.network.prefixlen
    msg["flags"] = IFA_F_NODAD
    msg["index"] = index
    msg["attrs"] = [("IFA_ADDRESS", str(address.ip))]
    msg["header"]["type"] = RTM_NEWADDR
    msg["header"]["flags"] = _NEW
    return msg


def _neighbor(index: int, address: IPv6Address, mac: str) -> ndmsg:
    msg = ndmsg()
    msg["family"] = socket.AF_INET6
    msg["ifindex"] = index
    msg["state"] = NUD_PERMANENT
    msg["attrs"] = [("NDA_DST", str(address)), ("NDA_LLADDR", mac)]
    msg["header"]["type"] = RTM_NEWNEIGH
    msg["header"]["flags"] = _NEW
    return msg


def _route(route: Route, ifindex) -> rtmsg:
    msg = rtmsg()
    msg["family"] = socket.AF_INET6
    msg["dst_len"] = route.dst.prefixlen
    msg["table"] = seg6local.RT_TABLE_MAIN
    msg["proto"] = RTPROT_STATIC if route.kind == "srv6" else RTPROT_BGP
    msg["type"] = seg6local.RTN_UNICAST
    attrs: list = [("RTA_DST", str(route.dst.network_address))]
    if len(route.nexthops) == 1:
        hop = route.nexthops[0]
        attrs += [("RTA_GATEWAY", str(hop.gateway)), ("RTA_OIF", ifindex(hop.ifname))]
    else:
        attrs.append(("RTA_MULTIPATH", [
            {"oif": ifindex(h.ifname), "hops": 0, "attrs": [("RTA_GATEWAY", str(h.gateway))]}
            for h in route.nexthops]))
    if route.source is not None:
        attrs.append(("RTA_PREFSRC", str(route.source)))
    msg["attrs"] = attrs
    msg["header"]["type"] = RTM_NEWROUTE
    msg["header"]["flags"] = _NEW
    return msg


class NodeNetlink:
    """Netlink socket bound to a node's namespace for its whole life (it pins the namespace:
    `close()` must run before the namespace can go away)."""

    def __init__(self, pid: int, ifindexes: dict[str, int] | None = None) -> None:
        sock = netns.socket_in(pid, socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
        # strict checking lets the kernel filter dumps (End SIDs by their device) instead of
        # pyroute2 parsing every route of a router in Python
        sock.setsockopt(SOL_NETLINK, NETLINK_GET_STRICT_CHK, 1)
        self.ipr = IPRoute(fileno=sock.detach())
        self._pid = pid
        self._index: dict[str, int] = dict(ifindexes or {})
        self._read = False
        self._queues: QueueStats | None = None  # opened by the first queue_stats()

    def close(self) -> None:
        self.ipr.close()
        if self._queues is not None:
            self._queues.close()

    def ifindexes(self) -> dict[str, int]:
        """Interface name -> index, read once (interfaces are only created, never renamed)."""
        if not self._read and (not self._index or SID_DEVICE not in self._index):
            self._index = {link.get_attr("IFLA_IFNAME"): link["index"]
                           for link in self.ipr.get_links()}
            self._read = True  # (a node whose End SIDs run in eBPF has no SID device)
        return self._index

    def ifindex(self, ifname: str) -> int:
        index = self._index.get(ifname)
        return index if index is not None else self.ifindexes()[ifname]

    def configure(self, cfg: NodeConfig, ports: list[PortSetup], mtu: int,
                  queue_prog: int | None = None, end_sids: str = "seg6local",
                  end_prog: int | None = None) -> None:
        """Install cfg; `ports` lists the ports to shape and delay; `queue_prog`,
        when given, is the fd of the ECN/trimming program to attach at every port's egress.
        `end_sids` says how End SIDs run (features.end_sid_mode): as seg6local routes, or,
        "ebpf", by the program `end_prog` at every port's ingress (a router's; hosts get none).

        Shapers go through pyroute2's tc API (htb's rate tables are its job); everything else
        is sent as one batch of messages per kind, which costs a fraction of one call each."""
        ipr = self.ipr
        for port, rate, buffer, delay in ports:
            shaping.shape_port(ipr, self.ifindex(port.ifname), rate, buffer, mtu)
            if delay is not None:
                link_delay.attach(ipr, self.ifindex(port.ifname), delay)
            if queue_prog is not None:
                fabric_queue.attach(ipr, self.ifindex(port.ifname), queue_prog)
            if end_prog is not None:
                usid_end.attach(ipr, self.ifindex(port.ifname), end_prog)
        idx = self.ifindex
        batches = [
            [_link_up(idx("lo"))] + [_link_up(idx(setup.port.ifname)) for setup in ports],
            [_address(idx(ifname), address) for ifname, address in cfg.addresses],
            [_neighbor(idx(ifname), address, mac) for ifname, address, mac in cfg.neighbors],
            [_route(route, idx) for route in cfg.routes],
        ]
        if end_sids == "seg6local":
            sid_dev = self._index[SID_DEVICE] = add_sid_device(ipr)
            batches.append([seg6local.end_sid_message(sid, sid_dev, BLOCK_BITS, USID_BITS)
                            for sid in cfg.end_sids])
        for batch in batches:  # in order: routes need their addresses' connected routes
            ipr.nlm_request_batch(batch)

    def queue_stats(self) -> dict[int, tuple[int, int]]:
        """Per port (ifindex): backlog bytes and drops of the data FIFO behind its shaper
        (qdisc_stats.py: read with struct, not pyroute2, since telemetry asks every sweep)."""
        if self._queues is None:
            self._queues = QueueStats(self._pid)
        return self._queues.read()

    def replace_plain_routes(self, delete: list[str],
                             replace: list[tuple[str, list[tuple[str, str]]]]) -> None:
        """Plain routes withdrawn (`delete`: prefixes) and replaced (prefix, [(gateway,
        ifname), ...]) as the baseline's routing converges around failed links."""
        for prefix in delete:
            self.ipr.route("del", dst=prefix)
        for prefix, nexthops in replace:
            hops = [{"gateway": gw, "oif": self.ifindex(ifname)} for gw, ifname in nexthops]
            extra = hops[0] if len(hops) == 1 else {"multipath": hops}
            self.ipr.route("replace", dst=prefix, proto=RTPROT_BGP, **extra)

    def end_sid_counters(self) -> dict[IPv6Network, dict]:
        return seg6local.dump_end_sids(self.ipr, self.ifindex(SID_DEVICE))
