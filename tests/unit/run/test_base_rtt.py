"""The base RTT the runner gives every QP (DCQCN's timers are ratios to it)."""
from __future__ import annotations

import pytest

from testbed.fabric.plan import make_plan
from testbed.run.traffic import agent_configs, base_rtt
from testbed.scenario.schema import parse

QUICKSTART = """name: q
fabric: {host_link: {rate: 25Mbit, buffer: 100KB}, fabric_link: {rate: 50Mbit, buffer: 100KB},
         mtu: 4200}
qp: {mss: 4096}
"""


def test_base_rtt_serializes_a_packet_and_its_ack_at_every_hop(tmp_path):
    """Across a spine: host port and leaf-to-host at 25 Mbit/s, leaf-to-spine and back down
    at 50; each hop carries a 4,096-byte payload with 40 bytes of our header and 62 of
    UDP/IPv6/Ethernet, and its 102-byte ACK back."""
    packet, ack = (4096 + 40 + 62) * 8, (40 + 62) * 8
    across = 2 * (packet + ack) / 25e6 + 2 * (packet + ack) / 50e6
    sc = parse(QUICKSTART, "q")
    assert base_rtt(sc) == pytest.approx(across)
    configs = agent_configs(make_plan(sc), sc, "rocev2", tmp_path)
    assert configs["h0"].qp.base_rtt == pytest.approx(across)
