"""Where a link gets its latency with `fabric.latency_by: netem`: behind the receiving port.

    port (ingress, clsact) ── u32 match-all, mirred redirect ──> ifb "lat<ifindex>"
    ifb root: netem delay <the link's latency>, limit <what the link holds in flight>
    ifb ──> back into the port's receive path (the stack, routing, the next shaper)

Why there: a packet leaves the sender's port after its queue and its serialization at line rate
(the shaper, testbed/kernel/shaping.py), then crosses the cable; putting the delay at the
receiving end keeps that order, and keeps delayed packets out of the shaped port's qdisc, whose
backlog the fidelity monitor's link check reads (testbed/kernel/bpf/link_gap.c). The ifb
re-injects what it sends into the port's own receive path without classifying it again. Each
delay device has a fabric-wide distinct index (PortDelay.ifindex), so the monitor, which keys
ports by index, never counts its dequeues as a port's. Everything lives in the node's namespace
and goes with it.
"""
from __future__ import annotations

from errno import EEXIST

from pyroute2.netlink.exceptions import NetlinkError

from testbed.errors import EnvironmentProblem
from testbed.fabric.latency import PortDelay

INGRESS = "ffff:fff2"  # clsact's ingress hook
ETH_P_ALL = 0x0003
REDIRECT_PRIO = 1


def attach(ipr, port_ifindex: int, delay: PortDelay) -> None:
    """Everything the port receives held for `delay.seconds` before the node sees it."""
    ipr.link("add", ifname=delay.ifname, kind="ifb", index=delay.ifindex)
    ipr.link("set", index=delay.ifindex, state="up")
    try:
        ipr.tc("add", "netem", index=delay.ifindex, handle="1:",
               delay=round(delay.seconds * 1e6), limit=delay.limit)
    except NetlinkError as exc:
        raise EnvironmentProblem(
            f"fabric.latency_by: netem needs sch_netem, which this kernel refused: {exc.args[1]}",
            "use a kernel with netem (stock Debian/Ubuntu kernels, e.g. the Vagrant VM; "
            "`modprobe sch_netem`), or latency_by: agents") from None
    try:
        ipr.tc("add", "clsact", index=port_ifindex)
    except NetlinkError as exc:  # EEXIST: the port's eBPF programs made it
        if exc.code != EEXIST:
            raise
    ipr.tc("add-filter", "u32", index=port_ifindex, parent=INGRESS, prio=REDIRECT_PRIO,
           protocol=ETH_P_ALL, target=0, keys=["0x0/0x0+0"],
           action={"kind": "mirred", "direction": "egress", "action": "redirect",
                   "ifindex": delay.ifindex})
