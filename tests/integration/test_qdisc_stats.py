"""Queue statistics as telemetry reads them (testbed/kernel/qdisc_stats.py), against pyroute2's
decoding of the same kernel dump, on a real fabric whose host port was just overrun."""
from __future__ import annotations

import socket
from pathlib import Path

from bench.telemetry import pyroute2_fifos
from testbed.kernel import netns

from .helpers import build

SLOW = """name: qdisc-stats
fabric: {planes: 1, leaves_per_plane: 2, spines_per_plane: 1, hosts_per_leaf: 1,
         host_link: {rate: 1Mbit, buffer: 20KB}, fabric_link: {rate: 1Mbit, buffer: 20KB}}
"""
FRAME = 14 + 40 + 8 + 1200  # Ethernet, IPv6, UDP, payload: what the FIFO counts


def test_backlog_and_drops_match_pyroute2(tmp_path: Path):
    network = build(SLOW, tmp_path)
    try:
        plan = network.plan
        # 60 datagrams of 1200 B at once into a 1 Mbit/s port with a 20 KB FIFO: it holds
        # what it can (draining at 125 KB/s) and drops the rest
        sock = netns.socket_in(network.pid("h0"), socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            sock.bind((str(plan.plain_address("h0", 0)), 0))
            for _ in range(60):
                sock.sendto(bytes(1200), (str(plan.plain_address("h1", 0)), 9))
        finally:
            sock.close()
        host = network.netlink("h0")
        ours = host.queue_stats()
        theirs = pyroute2_fifos(host)
        port = host.ifindex(plan.ports("h0")[0].ifname)
        backlog, drops = ours[port]
        assert backlog >= FRAME and backlog % FRAME == 0 and drops > 0  # bytes of whole frames
        assert ours.keys() == theirs.keys() and drops == theirs[port][1]
        for router in ("p0l0", "p0s0"):  # idle ports, several qdiscs each: equal throughout
            handle = network.netlink(router)
            assert handle.queue_stats() == pyroute2_fifos(handle)
            assert len(handle.queue_stats()) == len(plan.ports(router))
    finally:
        network.close()
