"""Routers' End SIDs in eBPF, for kernels without seg6local: the program `bpf/usid_end.c` at
the ingress of every router port, the SID each port's router owns, and its counters.

A kernel built without CONFIG_IPV6_SEG6_LWTUNNEL refuses every seg6local route, so the
`End flavors next-csid` SIDs of `testbed/kernel/seg6local.py` cannot exist there. The program
does what that End does to a uSID packet (the destination shifted by one uSID, then the
kernel's own lookup and forwarding), and counts what it shifted per port, where the
verification reads seg6local's counters. Hosts get none: an EV's packets only ever end at a
host's uSID (testbed/fabric/paths.py), which is the host's own address.

Loaded once per run through libbpf, like the ECN/trimming program (fabric_queue.py), and
attached by the build's workers, forked after the load.
"""
from __future__ import annotations

import ctypes
from collections.abc import Iterable
from ipaddress import IPv6Network
from pathlib import Path

from testbed.fabric.plan import BLOCK_BITS, USID_BITS, FabricPlan, Port
from testbed.kernel import libbpf, tc_bpf

OBJECT = Path(__file__).resolve().parent / "bpf" / "usid_end.o"
PROGRAM = "usid_end"


class EndSid(ctypes.Structure):
    _fields_ = [("block", ctypes.c_uint32), ("usid", ctypes.c_uint32)]


class EndCounters(ctypes.Structure):
    _fields_ = [("packets", ctypes.c_uint64)]


assert ctypes.sizeof(EndSid) == 8 and ctypes.sizeof(EndCounters) == 8  # as in the C file


def end_sid(sid: IPv6Network) -> EndSid:
    """The map's value for a router's SID (fcbb:bb0p:<uN>::/48): its block and its uSID."""
    if sid.prefixlen != BLOCK_BITS + USID_BITS:
        raise ValueError(f"{sid} is not a uSID prefix of {BLOCK_BITS + USID_BITS} bits")
    value = int(sid.network_address)
    return EndSid(block=value >> (128 - BLOCK_BITS),
                  usid=(value >> (128 - BLOCK_BITS - USID_BITS)) & ((1 << USID_BITS) - 1))


def router_sid_ports(plan: FabricPlan, nodes: Iterable[str] | None = None
                     ) -> list[tuple[str, Port, IPv6Network]]:
    """Every port of the routers among `nodes` (all when None), with its router's SID."""
    names = plan.routers if nodes is None else [n for n in nodes if n in set(plan.routers)]
    out = []
    for name in names:
        plane = plan.nodes[name].plane
        assert plane is not None  # routers belong to one plane
        sid = plan.sid(name, plane)
        out += [(name, port, sid) for port in plan.ports(name)]
    return out


def attach(ipr, ifindex: int, prog_fd: int) -> None:
    """The program at the port's ingress, where a packet arrives before its routing lookup."""
    tc_bpf.attach(ipr, ifindex, prog_fd, PROGRAM, tc_bpf.INGRESS)


class EbpfEndSids:
    """The loaded program and its maps; `close()` when the fabric is gone."""

    def __init__(self, path: Path = OBJECT) -> None:
        self._obj, self.prog_fd, (self._sids, self._counters) = tc_bpf.load(
            path, PROGRAM, ("end_sid", "end_counters"),
            "the eBPF End SID program (this kernel has no seg6local, which it stands in for)",
            "run `make bpf` (needs clang and libbpf-dev; scripts/install.sh installs and "
            "builds it), or use a kernel with SRv6 micro-SIDs (CONFIG_IPV6_SEG6_LWTUNNEL)",
            "use a kernel with SRv6 micro-SIDs (CONFIG_IPV6_SEG6_LWTUNNEL), or with eBPF at tc "
            "(CONFIG_BPF_SYSCALL, CONFIG_NET_CLS_BPF, CONFIG_NET_SCH_INGRESS)")

    def configure(self, ifindex: int, sid: IPv6Network) -> None:
        """The SID of the port's router, and zero counters."""
        key = ctypes.c_uint32(ifindex)
        libbpf.update(self._sids, key, end_sid(sid))
        libbpf.update(self._counters, key, EndCounters())

    def remove(self, ifindex: int) -> None:
        """The port executes no End SID from now on (its router's SID withdrawn there)."""
        libbpf.delete(self._sids, ctypes.c_uint32(ifindex))

    def packets(self, ifindex: int) -> int | None:
        """Packets the program shifted on this port; None where it holds no SID."""
        key, c = ctypes.c_uint32(ifindex), EndCounters()
        if not libbpf.lookup(self._sids, key, EndSid()):
            return None
        return c.packets if libbpf.lookup(self._counters, key, c) else 0

    def router_counters(self, plan: FabricPlan, nodes: Iterable[str] | None = None
                        ) -> dict[tuple[str, IPv6Network], int]:
        """Packets through each router's End SID (its ports summed), as
        `verify.read_counters` gives them from seg6local: a SID no port holds is absent, as
        a deleted route is from the dump."""
        out: dict[tuple[str, IPv6Network], int] = {}
        for name, port, sid in router_sid_ports(plan, nodes):
            packets = self.packets(port.ifindex)
            if packets is not None:
                out[(name, sid)] = out.get((name, sid), 0) + packets
        return out

    def close(self) -> None:
        self._obj.close()


def load(plan: FabricPlan, nodes: Iterable[str] | None = None) -> EbpfEndSids:
    """The program, loaded, with the SIDs of the routers among `nodes` (all when None)."""
    sids = EbpfEndSids()
    try:
        for _, port, sid in router_sid_ports(plan, nodes):
            sids.configure(port.ifindex, sid)
    except BaseException:
        sids.close()
        raise
    return sids
