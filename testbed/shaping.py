"""Where a port gets its line rate and its buffer: htb at the egress of every port.

Why htb with a byte FIFO under one class: the rate is enforced by the class, the buffer is a
byte limit like a switch port's (not a packet count), and later work can add a higher-priority
class beside it (trimmed headers overtaking data) without changing the root. netem and red are
missing on the project's kernel, so nothing here depends on them.
"""
from __future__ import annotations

from pyroute2.netlink.rtnl.tcmsg import plugins as tc_plugins
from pyroute2.netlink.rtnl.tcmsg import sched_pfifo

# pyroute2 0.9 has no bfifo plugin; bfifo's options are pfifo's struct (tc_fifo_qopt: a u32
# limit), in bytes instead of packets, so pfifo's encoder serves it as is.
tc_plugins.setdefault("bfifo", sched_pfifo)

ROOT = "1:"
DATA_CLASS = "1:10"
DATA_QDISC = "10:"


def shape_port(ipr, ifindex: int, rate_bps: int, buffer_bytes: int, mtu: int) -> None:
    """Limit the port to `rate_bps` with a byte FIFO of `buffer_bytes` behind the shaper."""
    # A burst of a few packets keeps htb accurate at high rates on a busy 2-core host
    # without letting a queue build up behind the shaper.
    burst = max(4 * mtu, rate_bps // 8 // 1000)  # at least 1 ms at line rate
    ipr.tc("add", "htb", index=ifindex, handle=ROOT, default=0x10)
    ipr.tc("add-class", "htb", index=ifindex, handle=DATA_CLASS, parent=ROOT,
           rate=f"{rate_bps}bit", ceil=f"{rate_bps}bit", burst=burst, cburst=burst,
           quantum=mtu + 14)
    ipr.tc("replace", "bfifo", index=ifindex, handle=DATA_QDISC, parent=DATA_CLASS,
           limit=buffer_bytes)
