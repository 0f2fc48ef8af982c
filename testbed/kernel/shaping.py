"""Where a port gets its line rate and its buffer: htb at the egress of every port.

    1: htb, default 1:10
    └─ 1:1   rate = ceil = line rate
       ├─ 1:20  control, prio 0: packets with DSCP CS6 (ACK, NACK, probes, trimmed
       │        headers), assured 1% of the line, may take all of it
       └─ 1:10  data, prio 1, assured 99%, behind a byte FIFO of the port's buffer
    filter: u32 on the IPv6 traffic class -> 1:20

Why: the rate is enforced by the parent class and the buffer is a byte limit like a switch
port's (not a packet count). The data class is assured nearly the whole line: measured here,
while control packets flowed, htb held data to its assured rate instead of lending it the idle
rest (with 90% assured, a port under load sent 22.5 of 25 Mbit/s). Control packets overtake
queued data, as NDP and UET switches let headers and acknowledgements do; without it an ACK
waits behind a full buffer (32 ms at 25 Mbit/s), the sender's window stalls and its delay
signal reads the reverse queue. netem and red are missing on the project's kernel, so nothing
here depends on them.
"""
from __future__ import annotations

from pyroute2.netlink.rtnl.tcmsg import plugins as tc_plugins
from pyroute2.netlink.rtnl.tcmsg import sched_pfifo

from hostagent.protocol.wire import CONTROL_TCLASS

# pyroute2 0.9 has no bfifo plugin; bfifo's options are pfifo's struct (tc_fifo_qopt: a u32
# limit), in bytes instead of packets, so pfifo's encoder serves it as is.
tc_plugins.setdefault("bfifo", sched_pfifo)

ROOT = "1:"
LINE_CLASS = "1:1"
DATA_CLASS = "1:10"
CONTROL_CLASS = "1:20"
DATA_QDISC = "10:"
DELAY_QDISC = "11:"  # the delay fault's netem in the FIFO's place: a qdisc's kind cannot change
ETH_P_IPV6 = 0x86DD
# the traffic class is bits 20..27 of the IPv6 header's first word; match its DSCP part
_DSCP_KEY = f"{CONTROL_TCLASS << 20:#010x}/{0xFC << 20:#010x}+0"


def burst_bytes(rate_bps: int, mtu: int) -> int:
    """What a shaped port that has idled may send at once, above its line rate: 4 packets, or
    1 ms at line rate if more. A burst of a few packets keeps htb at its rate on a busy 2-core
    host (with one packet it fell 7-13% short in the quick start) without letting a queue
    build up behind the shaper; a real port never sends above line rate (a similarity
    departure, testbed/run/similarity.py)."""
    return max(4 * mtu, rate_bps // 8 // 1000)


def _classes(ipr, command: str, ifindex: int, rate_bps: int, mtu: int) -> None:
    """The line class and its two children at `rate_bps` (htb's assured rates of the children
    are not capped by their parent: all three must follow the line rate)."""
    burst = burst_bytes(rate_bps, mtu)
    line = {"ceil": f"{rate_bps}bit", "burst": burst, "cburst": burst, "quantum": mtu + 14}
    ipr.tc(command, "htb", index=ifindex, handle=LINE_CLASS, parent=ROOT,
           rate=f"{rate_bps}bit", **line)
    ipr.tc(command, "htb", index=ifindex, handle=CONTROL_CLASS, parent=LINE_CLASS,
           rate=f"{rate_bps // 100}bit", prio=0, **line)
    ipr.tc(command, "htb", index=ifindex, handle=DATA_CLASS, parent=LINE_CLASS,
           rate=f"{rate_bps - rate_bps // 100}bit", prio=1, **line)


def shape_port(ipr, ifindex: int, rate_bps: int, buffer_bytes: int, mtu: int) -> None:
    """Limit the port to `rate_bps`, data behind a byte FIFO of `buffer_bytes`, control first."""
    ipr.tc("add", "htb", index=ifindex, handle=ROOT, default=0x10)
    _classes(ipr, "add-class", ifindex, rate_bps, mtu)
    ipr.tc("replace", "bfifo", index=ifindex, handle=DATA_QDISC, parent=DATA_CLASS,
           limit=buffer_bytes)
    ipr.tc("add-filter", "u32", index=ifindex, parent=0x10000, prio=1, protocol=ETH_P_IPV6,
           target=0x10020, keys=[_DSCP_KEY])


def set_port_rate(ipr, ifindex: int, rate_bps: int, mtu: int) -> None:
    """A shaped port's line rate changed in place (the degrade fault, and its undoing)."""
    _classes(ipr, "change-class", ifindex, rate_bps, mtu)


def set_port_delay(ipr, ifindex: int, limit_bytes: int, delay_s: float | None, mtu: int) -> None:
    """The FIFO behind a port's shaper replaced by a netem delay of `delay_s` (as many packets
    as the FIFO's bytes hold), or put back (None): the delay fault and its undoing. Each under
    its own handle, grafted in the other's place: the kernel refuses to replace a qdisc by one
    of another kind under the same handle (EINVAL)."""
    if delay_s is None:
        ipr.tc("replace", "bfifo", index=ifindex, handle=DATA_QDISC, parent=DATA_CLASS,
               limit=limit_bytes)
    else:
        ipr.tc("replace", "netem", index=ifindex, handle=DELAY_QDISC, parent=DATA_CLASS,
               delay=int(delay_s * 1e6), limit=max(1, limit_bytes // mtu))
