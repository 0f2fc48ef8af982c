"""In-fabric ECN marking and trimming: the eBPF program on test packets, on every router port of
a built fabric, and under real load (trims NACKed by the receiver; with trimming off, drops)."""
from __future__ import annotations

import json
import struct
from ipaddress import IPv6Address
from pathlib import Path

import pandas as pd
import pytest

from hostagent.protocol import wire
from testbed.kernel import libbpf
from testbed.kernel.fabric_queue import MILLION, FabricQueues, PortConfig

from .helpers import build, run_scenario

TC_ACT_OK, TC_ACT_SHOT = 0, 2
ECT0, CE = 0x02, 0x03
SPRAYED = "fcbb:bb00:e000:d001:101::"  # a uSID destination: an MRC packet
PLAIN = "fd10:0:1::101"  # a plain destination: a RoCEv2 packet


def checksum(data: bytes) -> int:
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame(dst: str, tclass: int, kind: int = wire.DATA, payload: int = 1024) -> bytes:
    """Ethernet + IPv6 + UDP (valid checksum) + our header + payload, as a host sends it."""
    body = wire.encode(wire.Header(type=kind, length=payload, psn=7), bytes(payload))
    src, dst_b = IPv6Address("fcbb:bb00:100::").packed, IPv6Address(dst).packed
    pseudo = src + dst_b + struct.pack("!I", 8 + len(body)) + b"\0\0\0\x11"
    udp = struct.pack("!HHHH", 4791, 4791, 8 + len(body), 0)
    udp = udp[:6] + struct.pack("!H", checksum(pseudo + udp + body) or 0xFFFF)
    ip = struct.pack("!IHBB", (6 << 28) | (tclass << 20), 8 + len(body), 17, 64) + src + dst_b
    return b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd" + ip + udp + body


def tclass_of(packet: bytes) -> int:
    return ((packet[14] & 0x0F) << 4) | (packet[15] >> 4)


@pytest.fixture
def queues():
    q = FabricQueues()
    # test runs see the loopback device (ifindex 1); 1 B/s: the queue does not drain between
    # packets, so the thresholds are crossed exactly where the test says. ECN is a step.
    q.configure(1, PortConfig(rate=1, kmin=1500, kmax=1500, pmax=MILLION, trim=3000,
                              buffer=4500))
    yield q
    q.close()


def test_program_passes_marks_trims_and_drops(queues: FabricQueues):
    def run(packet: bytes) -> tuple[int, bytes]:
        return libbpf.test_run(queues.prog_fd, packet)

    # the queue counts whole frames (1126 B here), a trimmed one as its 102 B of headers; ECN
    # looks at the bytes ahead of a packet, trimming and the buffer at whether it fits
    verdict, out = run(frame(SPRAYED, ECT0))  # nothing ahead: below every threshold
    assert verdict == TC_ACT_OK and tclass_of(out) == ECT0
    verdict, out = run(frame(SPRAYED, ECT0))  # 1126 B ahead: not above ECN's 1500
    assert verdict == TC_ACT_OK and tclass_of(out) == ECT0 and len(out) == 1126
    verdict, out = run(frame(PLAIN, ECT0))  # 2252 B ahead: marked; RoCEv2 is never trimmed
    assert verdict == TC_ACT_OK and tclass_of(out) == CE and len(out) == 1126
    verdict, out = run(frame(SPRAYED, ECT0))  # 3378 + 1126 B above the trim threshold
    assert verdict == TC_ACT_OK and len(out) == 14 + 40 + 8 + wire.HEADER_SIZE
    header, payload = wire.decode(out[62:])
    assert header.trimmed and header.length == 1024 and header.psn == 7 and not len(payload)
    assert tclass_of(out) >> 2 == wire.CONTROL_DSCP, "served first from here on"
    assert struct.unpack("!H", out[18:20])[0] == 48 == struct.unpack("!H", out[58:60])[0]
    pseudo = out[22:54] + struct.pack("!I", 48) + b"\0\0\0\x11"
    assert checksum(pseudo + out[54:]) == 0, "a receiver accepts the trimmed header"
    verdict, _ = run(frame(PLAIN, ECT0))  # 3480 + 1126 B: beyond the buffer
    assert verdict == TC_ACT_SHOT
    verdict, out = run(frame(SPRAYED, wire.CONTROL_TCLASS, kind=wire.ACK, payload=0))
    assert verdict == TC_ACT_OK and out[14:] == frame(SPRAYED, wire.CONTROL_TCLASS,
                                                      kind=wire.ACK, payload=0)[14:]
    counters = queues.counters(1)
    assert {k: counters[k] for k in ("packets", "marked", "trimmed", "dropped")} == {
        "packets": 6, "marked": 1, "trimmed": 1, "dropped": 1}


LINE = 1_250_000  # bytes/s: 10 Mbit/s, a 1126 B frame every 0.9 ms
FEED, OTHER_FEED = 7, 8  # ifindexes of ports feeding loopback's (the program's map, no device)


def marks(queues: FabricQueues, feeds: list[int], packets: int) -> int:
    """CE marks on `packets` ECN-capable frames handed to the program as fast as Python can
    (tens of microseconds apart), coming in through `feeds` in turn."""
    before = queues.counters(1)["marked"]
    for i in range(packets):
        libbpf.test_run(queues.prog_fd, frame(PLAIN, ECT0), feeds[i % len(feeds)])
    return queues.counters(1)["marked"] - before


def test_a_clump_from_one_link_is_not_a_queue_but_two_links_at_line_rate_are():
    """Packets handed over in a clump (a shaper's burst, a softirq batch) enter the queue as
    the link that fed them would have delivered them: one link at line rate never puts a
    packet ahead of the next, even at a threshold of one frame; two at line rate do."""
    q = FabricQueues()
    try:
        one_frame = len(frame(PLAIN, ECT0))
        step = PortConfig(rate=LINE, kmin=one_frame, kmax=one_frame, pmax=MILLION,
                          buffer=10**6)
        for feed in (1, FEED, OTHER_FEED):
            q.configure(feed, step)
        assert marks(q, [FEED], 200) == 0
        assert marks(q, [FEED, OTHER_FEED], 200) > 90, "every other packet waits behind one"
        q.configure(1, step)
        assert marks(q, [0], 200) > 150, "from nowhere: the clump is counted as it came"
    finally:
        q.close()


def test_red_marks_with_a_probability_rising_from_kmin_to_kmax():
    """With nothing drained, the i-th of 400 frames has i frames ahead: between K_min = 0 and
    K_max = 400 frames at P_max = 100% it is marked with probability i/400, 199.5 marks in
    expectation (standard deviation 8.2); a step at K_min would mark 399."""
    q = FabricQueues()
    try:
        one_frame = len(frame(PLAIN, ECT0))
        q.configure(1, PortConfig(rate=1, kmin=0, kmax=400 * one_frame, pmax=MILLION,
                                  buffer=10**6))
        assert 160 <= marks(q, [0], 400) <= 240
    finally:
        q.close()


def tc_json(network, node: str, *args: str) -> list[dict]:
    out = network.node(node).cmd("tc -j " + " ".join(args))
    return json.loads(out) if out.strip() else []


def test_every_router_port_runs_the_program_and_hosts_none(tmp_path: Path):
    network = build("name: q\nfabric: {fabric_link: {buffer: 60KB}}", tmp_path)
    try:
        plan = network.plan
        for name, node in plan.nodes.items():
            for port in plan.ports(name):
                assert network.ifindex[name][port.ifname] == port.ifindex
                filters = tc_json(network, name, "filter", "show", "dev", port.ifname, "egress")
                names = [f.get("options", {}).get("bpf_name") for f in filters]
                fifo = [q for q in tc_json(network, name, "qdisc", "show", "dev", port.ifname)
                        if q["kind"] == "bfifo"]
                link = plan.link_by_ports[(name, port.ifname)]
                if node.role == "host":
                    assert not any(names) and fifo[0]["options"]["limit"] == link.buffer
                else:
                    assert any(n and n.startswith("fabric_queue") for n in names), names
                    assert fifo[0]["options"]["limit"] == 2 * link.buffer, "headroom"
    finally:
        network.close()


def test_with_ecn_and_trimming_off_no_program_is_loaded(tmp_path: Path):
    network = build("name: q\nswitch: {ecn: false, trim: false}", tmp_path)
    try:
        assert network.queues is None
        for name in network.plan.routers:
            for port in network.plan.ports(name):
                assert not tc_json(network, name, "filter", "show", "dev", port.ifname,
                                   "egress")
                fifo = [q for q in tc_json(network, name, "qdisc", "show", "dev", port.ifname)
                        if q["kind"] == "bfifo"]
                assert fifo[0]["options"]["limit"] == network.plan.link_by_ports[
                    (name, port.ifname)].buffer, "the FIFO is the buffer again"
    finally:
        network.close()


INCAST = """name: {name}
switch: {{trim: {trim}}}
fabric:
  host_link: {{rate: 25Mbit, buffer: 100KB}}
  fabric_link: {{rate: 25Mbit, buffer: 100KB}}
  mtu: 4200
transport: [mrc]
qp: {{mss: 4096}}
workload: {{collective: all_gather, size: 1MiB, iterations: 2, warmup: 0, ranks: [h0, h2]}}
{background}
"""
UDP_INCAST = ("background:\n  - {pattern: incast, at: 0.0, duration: 60, kind: udp, "
              "rate: 20Mbit, receiver: h0, senders: [h1, h3], plane: 0}")


def port_totals(run: Path) -> pd.Series:
    links = pd.read_parquet(run / "links.parquet").sort_values("time")
    last = links.groupby(["node", "ifname"]).last()
    return last[["trimmed", "bpf_dropped", "ecn_marked", "queue_drops"]].sum()


def qp_totals(run: Path) -> pd.Series:
    return pd.read_parquet(run / "qps.parquet")[
        ["trims_received", "nacks_sent", "retransmits", "timeouts"]].sum()


def test_trims_below_and_above_the_threshold_and_drops_without_trimming(tmp_path: Path):
    """Alone, the collective's queues stay below the trim threshold: nothing is trimmed. Next
    to a UDP incast (40 Mbit/s into h0's 25 Mbit/s port) the port's queue passes it: MRC's
    data to h0 is trimmed, the receiver NACKs every trimmed header and the sender resends.
    The same load with trimming off loses packets instead, and no header arrives."""
    for sub in "abc":
        (tmp_path / sub).mkdir()
    quiet, = run_scenario(INCAST.format(name="quiet", trim="true", background=""),
                          tmp_path / "a", tmp_path / "a-results")
    assert port_totals(quiet)["trimmed"] == 0 and qp_totals(quiet)["trims_received"] == 0

    trimmed, = run_scenario(INCAST.format(name="trim", trim="true", background=UDP_INCAST),
                            tmp_path / "b", tmp_path / "b-results")
    ports, qps = port_totals(trimmed), qp_totals(trimmed)
    assert ports["trimmed"] > 0 and ports["queue_drops"] == 0
    # headers trimmed at the very end may arrive after their receiver finished and counted
    assert 0 < qps["trims_received"] <= ports["trimmed"]
    # a trimmed header of a PSN that has landed meanwhile (an earlier copy) needs no NACK
    assert qps["nacks_sent"] > 0 and qps["retransmits"] > 0

    dropped, = run_scenario(INCAST.format(name="drop", trim="false", background=UDP_INCAST),
                            tmp_path / "c", tmp_path / "c-results")
    ports, qps = port_totals(dropped), qp_totals(dropped)
    assert ports["trimmed"] == 0 and ports["bpf_dropped"] > 0
    assert qps["trims_received"] == 0 and qps["retransmits"] > 0
    for run in (quiet, trimmed, dropped):
        assert pd.read_parquet(run / "iterations.parquet").verified.all()
