"""A pyroute2 handle inside one node's namespace, and the routing state it installs there.

The whole node is configured over one netlink socket: interfaces up, addresses, static
neighbours, routes (ECMP where the plan says so), End SIDs, and the shaper of every port.
"""
from __future__ import annotations

import socket
from ipaddress import IPv6Network

from pyroute2 import IPRoute
from pyroute2.netlink import NETLINK_ROUTE

from . import netns, seg6local, shaping
from .plan import BLOCK_BITS, USID_BITS, Port
from .routes import NodeConfig

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


class NodeNetlink:
    """Netlink socket bound to a node's namespace for its whole life (it pins the namespace:
    `close()` must run before the namespace can go away)."""

    def __init__(self, pid: int) -> None:
        sock = netns.socket_in(pid, socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
        self.ipr = IPRoute(fileno=sock.detach())
        self._index: dict[str, int] = {}

    def close(self) -> None:
        self.ipr.close()

    def ifindex(self, ifname: str) -> int:
        if not self._index:
            self._index = {link.get_attr("IFLA_IFNAME"): link["index"]
                           for link in self.ipr.get_links()}
        return self._index[ifname]

    def configure(self, cfg: NodeConfig, ports: list[tuple[Port, int, int]], mtu: int) -> None:
        """Install cfg; `ports` lists (port, rate bit/s, buffer bytes) to shape."""
        ipr = self.ipr
        ipr.link("set", index=self.ifindex("lo"), state="up")
        for port, rate, buffer in ports:
            idx = self.ifindex(port.ifname)
            shaping.shape_port(ipr, idx, rate, buffer, mtu)
            ipr.link("set", index=idx, state="up")
        for ifname, address in cfg.addresses:
            ipr.addr("add", index=self.ifindex(ifname), address=str(address.ip),
                     prefixlen=address.network.prefixlen, flags=IFA_F_NODAD)
        for ifname, address, mac in cfg.neighbors:
            ipr.neigh("add", dst=str(address), lladdr=mac, ifindex=self.ifindex(ifname),
                      state=NUD_PERMANENT)
        for route in cfg.routes:
            proto = RTPROT_STATIC if route.kind == "srv6" else RTPROT_BGP
            hops = [{"gateway": str(h.gateway), "oif": self.ifindex(h.ifname)}
                    for h in route.nexthops]
            if len(hops) == 1:
                ipr.route("add", dst=str(route.dst), proto=proto, **hops[0])
            else:
                ipr.route("add", dst=str(route.dst), proto=proto, multipath=hops)
        sid_dev = add_sid_device(ipr)
        ipr.nlm_request_batch([seg6local.end_sid_message(sid, sid_dev, BLOCK_BITS, USID_BITS)
                               for sid in cfg.end_sids])

    def end_sid_counters(self) -> dict[IPv6Network, dict]:
        return seg6local.dump_end_sids(self.ipr)
