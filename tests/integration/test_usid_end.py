"""The eBPF End SID (testbed/kernel/usid_end.py): what it does to a packet, checked against
RFC 9800's NEXT-C-SID shift written out by hand, and where a fabric runs it."""
from __future__ import annotations

import json
from ipaddress import IPv6Address, IPv6Network
from pathlib import Path

import pytest

from testbed.kernel import features, libbpf
from testbed.kernel.usid_end import EbpfEndSids

from .helpers import build

TC_ACT_OK = 0
SID = IPv6Network("fcbb:bb00:e000::/48")  # spine 0 of plane 0 (uSID e000)


def frame(dst: str) -> bytes:
    """Ethernet + IPv6 + an 8-byte UDP datagram to `dst`."""
    src = IPv6Address("fcbb:bb00:100::").packed
    ip = (bytes([0x60, 0, 0, 0]) + (16).to_bytes(2, "big") + bytes([17, 64]) + src +
          IPv6Address(dst).packed)
    return (b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd" + ip + b"\x12\xb7\x12\xb7\x00\x10\x00\x00"
            + b"payload!")


def dst_of(packet: bytes) -> str:
    return str(IPv6Address(packet[38:54]))


@pytest.fixture
def end_sids():
    sids = EbpfEndSids()
    sids.configure(1, SID)  # test runs see the loopback device (ifindex 1)
    yield sids
    sids.close()


def test_the_routers_usid_is_consumed_and_the_rest_shifted(end_sids: EbpfEndSids):
    cases = {  # destination -> after the program, by RFC 9800's shift
        "fcbb:bb00:e000:d001:103::": "fcbb:bb00:d001:103::",
        "fcbb:bb00:e000:1:2:3:4:5": "fcbb:bb00:1:2:3:4:5:0",
        "fcbb:bb00:e000::1": "fcbb:bb00::1:0",
        # not this router's: another uSID first, another plane's block, a plain address
        "fcbb:bb00:e001:d001:103::": "fcbb:bb00:e001:d001:103::",
        "fcbb:bb01:e000:d001:103::": "fcbb:bb01:e000:d001:103::",
        "fd10:0:1::103": "fd10:0:1::103",
        # its uSID with nothing after it: left to the routing table (no route: dropped)
        "fcbb:bb00:e000::": "fcbb:bb00:e000::",
    }
    for before, after in cases.items():
        packet = frame(before)
        verdict, out = libbpf.test_run(end_sids.prog_fd, packet)
        assert verdict == TC_ACT_OK and dst_of(out) == str(IPv6Address(after)), before
        assert out[:38] + out[54:] == packet[:38] + packet[54:], "only the destination changes"
    assert end_sids.packets(1) == 3, "the three shifted packets are counted"


def test_a_port_without_a_sid_passes_everything_and_counts_nothing(end_sids: EbpfEndSids):
    end_sids.remove(1)
    packet = frame("fcbb:bb00:e000:d001:103::")
    verdict, out = libbpf.test_run(end_sids.prog_fd, packet)
    assert verdict == TC_ACT_OK and out == packet
    assert end_sids.packets(1) is None


def test_a_fabric_runs_it_at_every_router_ports_ingress_where_seg6local_is_missing(
        tmp_path: Path):
    if features.end_sid_mode() != "ebpf":
        pytest.skip("this kernel has seg6local: End SIDs are its routes (test_fabric.py)")
    network = build("name: q", tmp_path)
    try:
        for name, node in network.plan.nodes.items():
            assert "seg6local" not in network.node(name).cmd("ip -6 route show")
            for port in network.plan.ports(name):
                out = network.node(name).cmd(f"tc -j filter show dev {port.ifname} ingress")
                names = [f.get("options", {}).get("bpf_name")
                         for f in (json.loads(out) if out.strip() else [])]
                if node.role == "host":
                    assert not any(names), (name, port.ifname)
                else:
                    assert any(n and n.startswith("usid_end") for n in names), names
    finally:
        network.close()
