"""One end of a link between two servers: a VXLAN device that is the node's port.

Mininet's cluster edition makes a `gretap` in the server's root namespace and moves it into
the node (`RemoteGRELink`), lowering every link's MTU to 1450. This kernel has no GRE; VXLAN
carries Ethernet just the same, so IPv6 with uSID destinations, the port's htb shaper and the
eBPF switch queue work on the tunnel's end exactly as on a veth. Differences from Mininet:

- the device is created by one netlink message sent *from the server's namespace* straight
  into the node's (`IFLA_NET_NS_PID`): the kernel binds the tunnel's UDP socket to the
  namespace the request came from (the underlay), and the device to the node, so there is no
  move and nothing of the link ever sits in the server's namespace;
- it gets the plan's interface index, name and MAC, the fabric MTU (the underlay's MTU is
  raised instead, checked in preflight) and `gso_max_segs 1`, like every port;
- `remote` with `nolearning`: one static, permanent all-zeros FDB entry sends every frame to
  the peer server, and nothing is learned from the underlay; one VNI per link;
- GRO, GSO and TSO off on the device: a switch port forwards packets, not super-packets.
"""
from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass
from ipaddress import IPv6Address, ip_address

from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST
from pyroute2.netlink.rtnl import RTM_NEWLINK
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

OFFLOADS = ("gro", "gso", "tso")


@dataclass(frozen=True)
class TunnelEnd:
    """One end: the port it realizes, the node's namespace (pid), and the two underlay
    addresses as seen from this end's server."""

    ifname: str
    ifindex: int
    mac: str
    node_pid: int
    vni: int
    local: str
    remote: str
    port: int
    mtu: int


def new_link_message(end: TunnelEnd) -> ifinfmsg:
    """RTM_NEWLINK for the end; send it over a netlink socket of the server's namespace."""
    v6 = isinstance(ip_address(end.local), IPv6Address)
    data = [("IFLA_VXLAN_ID", end.vni),
            ("IFLA_VXLAN_LOCAL6" if v6 else "IFLA_VXLAN_LOCAL", end.local),
            ("IFLA_VXLAN_GROUP6" if v6 else "IFLA_VXLAN_GROUP", end.remote),  # unicast: the FDB
            ("IFLA_VXLAN_PORT", end.port),
            ("IFLA_VXLAN_LEARNING", 0),
            ("IFLA_VXLAN_TTL", 64)]
    msg = ifinfmsg()
    msg["family"] = socket.AF_UNSPEC
    msg["index"] = end.ifindex
    msg["attrs"] = [("IFLA_IFNAME", end.ifname), ("IFLA_NET_NS_PID", end.node_pid),
                    ("IFLA_ADDRESS", end.mac), ("IFLA_MTU", end.mtu),
                    ("IFLA_GSO_MAX_SEGS", 1),
                    ("IFLA_LINKINFO", {"attrs": [("IFLA_INFO_KIND", "vxlan"),
                                                 ("IFLA_INFO_DATA", {"attrs": data})]})]
    msg["header"]["type"] = RTM_NEWLINK
    msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    return msg


def probe() -> str | None:
    """None if this kernel makes VXLAN devices (in a throwaway namespace), else why not."""
    from pyroute2 import IPRoute
    from pyroute2.netlink import NETLINK_ROUTE
    from pyroute2.netlink.exceptions import NetlinkError

    from testbed.kernel import netns

    with netns.fresh():
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
    with IPRoute(fileno=sock.detach()) as ipr:
        try:
            ipr.link("add", ifname="vxprobe", kind="vxlan", vxlan_id=1, vxlan_port=4789,
                     vxlan_local="127.0.0.1", vxlan_learning=0)
        except NetlinkError as exc:
            return f"the kernel refused a VXLAN device: {exc.args[1]}"
    return None


def offloads_off(node_pid: int, ifname: str) -> None:
    """GRO, GSO and TSO off on the device, in the node's namespace (ethtool)."""
    cmd = ["mnexec", "-a", str(node_pid), "ethtool", "-K", ifname]
    for feature in OFFLOADS:
        cmd += [feature, "off"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    if res.returncode != 0:
        raise RuntimeError(f"ethtool -K {ifname} {' '.join(OFFLOADS)} off: "
                           f"{res.stderr.strip() or res.returncode}")


def offloads(node_pid: int, ifname: str) -> dict[str, str]:
    """The device's offload states as ethtool -k reports them (for tests and checks)."""
    res = subprocess.run(["mnexec", "-a", str(node_pid), "ethtool", "-k", ifname],
                         capture_output=True, text=True, timeout=10, check=True)
    names = {"generic-receive-offload": "gro", "generic-segmentation-offload": "gso",
             "tcp-segmentation-offload": "tso"}
    out = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in names:
            out[names[key.strip()]] = value.split()[0] if value.split() else ""
    return out
