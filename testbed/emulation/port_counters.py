"""One node's port counters as telemetry reads them, on whichever machine holds the node.

Interface counters come from /proc/<pid>/net/dev, which shows the namespace of the node's
shell: no netlink, no namespace switch. Queue drops and backlog (the byte FIFO behind each
port's shaper) come from a netlink qdisc dump of the node, when asked for (about 0.1 ms a node,
testbed/kernel/qdisc_stats.py). Router ports running the ECN/trimming program add its
counters, read from its BPF map.
`FabricNetwork.sample_ports` reads every node of a single machine with this; in the cluster mode
each server's agent reads its own nodes with it.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from testbed.fabric.plan import Port
from testbed.kernel.fabric_queue import FabricQueues
from testbed.kernel.rtnl import NodeNetlink

# [net/dev counters (rx_bytes, rx_packets, rx_errors, rx_drop, tx_...), FIFO backlog, FIFO
# drops, the eBPF queue's counters or None, wall-clock time the counters were read (the reading
# machine's clock)]: plain lists, as a server's agent sends them back
PortSample = list


def read_net_dev(pid: int, wanted: set[str]) -> dict[str, tuple[int, ...]]:
    """Counters of the node's interfaces named in `wanted`."""
    out: dict[str, tuple[int, ...]] = {}
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        if name in wanted:
            v = rest.split()
            out[name] = (int(v[0]), int(v[1]), int(v[2]), int(v[3]),
                         int(v[8]), int(v[9]), int(v[10]), int(v[11]))
    return out


def read_node_ports(pid: int, ports: Sequence[Port], handle: NodeNetlink,
                    queues: FabricQueues | None, with_queues: bool) -> dict[str, PortSample]:
    """Every port of one node that its namespace shows, by interface name."""
    counters = read_net_dev(pid, {p.ifname for p in ports})
    # each node stamped as read: on a loaded machine a sweep over the nodes takes tens of ms,
    # and a fault window's edges are judged against these times
    read_at = time.time()
    qstats = handle.queue_stats() if with_queues else {}
    out: dict[str, PortSample] = {}
    for port in ports:
        c = counters.get(port.ifname)
        if c is None:
            continue
        backlog, drops = qstats.get(handle.ifindex(port.ifname), (None, None))
        bpf = queues.counters(port.ifindex) if queues is not None else None
        out[port.ifname] = [list(c), backlog, drops, bpf, read_at]
    return out
