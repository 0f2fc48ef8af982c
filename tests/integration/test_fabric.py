"""A real fabric: built, proven, shaped, and its verification shown to catch a broken path."""
from __future__ import annotations

import json
import os
import socket
import time
from ipaddress import IPv6Network
from pathlib import Path

import pytest

from testbed.emulation.probes import PROBE_PORT
from testbed.emulation.verify import verify
from testbed.fabric.paths import ev
from testbed.fabric.plan import block
from testbed.kernel import features, netns
from testbed.lifecycle.progress import Progress

from .helpers import build, iperf3_tcp_mbps, run_cli


def test_run_verify_only_proves_every_ev(results_dir: Path):
    res = run_cli("run", "--verify-only", results=results_dir)
    assert res.returncode == 0, res.stderr
    assert "40 EVs proven" in res.stderr
    assert "End SID counters: 8 routers checked, 0 mismatched" in res.stderr
    (run,) = results_dir.iterdir()
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["error"] is None
    assert set(meta["phases"]) >= {"preflight", "nodes", "links", "routes", "verify", "teardown"}
    report = json.loads((run / "verify.json").read_text())
    assert report["ok"] and report["probed"] == 40 and report["received"] == 40
    assert (run / "scenario.yaml").read_text().splitlines()[1].startswith("# The default scenario")


def test_verification_catches_a_missing_end_sid(quickstart):
    """Remove spine p0s0's End SID: exactly the EVs through p0s0 must fail, and its counter."""
    if features.end_sid_mode() == "seg6local":
        quickstart.netlink("p0s0").ipr.route("del", dst="fcbb:bb00:e000::/48")
    else:  # the eBPF End at the spine's ports
        for port in quickstart.plan.ports("p0s0"):
            quickstart.end_sids.remove(port.ifindex)
    plan = quickstart.plan
    plan.scenario.verify.__dict__["retries"] = 0  # no point resending into a black hole
    report = verify(quickstart, Progress(quiet=True))
    assert not report.ok
    failed = {(f.ev.src, f.ev.dst, f.ev.label) for f in report.failures}
    expected = {(a, b, "p0s0") for a in plan.hosts for b in plan.hosts
                if a != b and plan.leaf_index(a) != plan.leaf_index(b)}
    assert failed == expected
    assert all(f.problem.startswith("lost") for f in report.failures)
    assert [(m.router, str(m.sid)) for m in report.mismatches] == [("p0s0", "fcbb:bb00:e000::/48")]
    assert "p0s0" in report.table()


def test_verification_catches_a_misrouted_spine(quickstart):
    """Leaf p0l0 sends p0s1's uSID to p0s0: p0s0 has no route for it, those EVs are lost."""
    ipr = quickstart.netlink("p0l0").ipr
    ipr.route("replace", dst="fcbb:bb00:e001::/48", gateway="fd20:0:4::2",
              oif=quickstart.netlink("p0l0").ifindex("p0l0-eth2"))
    report = verify(quickstart, Progress(quiet=True))
    failed = {(f.ev.src, f.ev.label) for f in report.failures}
    assert failed == {("h0", "p0s1"), ("h1", "p0s1")}


def test_capture_on_a_spine_shows_the_usid_shift(quickstart, tmp_path: Path):
    """Independent of the testbed's own checks: tcpdump on p0s0 sees the destination shift."""
    spine = quickstart.node("p0s0")
    pcap = tmp_path / "p0s0.pcap"
    dump = spine.popen(["tcpdump", "-i", "any", "-nn", "-U", "--immediate-mode", "-w", str(pcap),
                        f"udp port {PROBE_PORT}"], stderr=-1, stdout=-1)
    try:
        deadline = time.monotonic() + 10
        while b"listening" not in (dump.stderr.readline() or b"") and time.monotonic() < deadline:
            pass
        path = ev(quickstart.plan, "h0", "h3", 0, 0)
        assert str(path.address) == "fcbb:bb00:e000:d001:103::"
        with netns.socket_in(quickstart.pid("h0"), socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.sendto(b"capture-me", (str(path.address), PROBE_PORT))
        time.sleep(0.5)
    finally:
        dump.terminate()
        dump.wait(5)
        dump.stderr.close()
        dump.stdout.close()
    text = spine.cmd(f"tcpdump -nn -r {pcap}")
    lines = [line for line in text.splitlines() if "UDP" in line]
    arriving = [line for line in lines if " In " in line and "> fcbb:bb00:e000:d001:103::" in line]
    leaving = [line for line in lines if " Out " in line and "> fcbb:bb00:d001:103::" in line]
    assert arriving and leaving, f"expected the uSID shift on the wire, got:\n{text}"
    assert "p0s0-eth0" in arriving[0] and "p0s0-eth1" in leaving[0]


def test_ports_are_shaped_to_their_rate(tmp_path: Path):
    """htb at the scenario's rate, and real TCP (iperf3) through it gets close to it."""
    network = build("name: shaped\nfabric: {host_link: {rate: 20Mbit, buffer: 60KB}}", tmp_path)
    try:
        classes = network.node("h0").cmd("tc class show dev h0-eth0")
        assert "rate 20Mbit ceil 20Mbit" in classes
        assert "limit 60000b" in network.node("h0").cmd("tc qdisc show dev h0-eth0")
        assert "rate 100Mbit" in network.node("p0l0").cmd("tc class show dev p0l0-eth2")
        mbps = iperf3_tcp_mbps(network, "h0", "h3", "fd10:0:1::103", seconds=3)
        assert 17 <= mbps <= 20.4, f"{mbps:.1f} Mbit/s through a 20 Mbit/s port"
    finally:
        network.close()


def test_baseline_routes_are_ecmp_with_l4_hash(quickstart):
    leaf = quickstart.node("p0l0")
    routes = leaf.cmd("ip -6 route show fd10:0:1::/64")
    assert routes.count("nexthop via") == 2 and "proto bgp" in routes
    assert leaf.cmd("sysctl -n net.ipv6.fib_multipath_hash_policy").strip() == "1"
    assert "1 received" in quickstart.node("h0").cmd("ping -c1 -W2 fd10:1:1::103")


def test_a_hosts_usid_routes_name_its_source(quickstart):
    """The kernel takes the route's source instead of choosing one per datagram (RFC 6724
    over every address of the port), and it is the address that choice gave."""
    host = quickstart.node("h0")
    for plane in range(2):
        own = quickstart.plan.srv6_address("h0", plane)
        assert f"src {own} " in host.cmd(f"ip -6 route show {block(plane)}")
        far = ev(quickstart.plan, "h0", "h3", plane, 0).address
        assert f"src {own} " in host.cmd(f"ip -6 route get {far}")


def test_end_sids_carry_the_next_csid_flavor(quickstart):
    if features.end_sid_mode() != "seg6local":
        pytest.skip("this kernel has no seg6local: End SIDs run in eBPF (test_usid_end.py)")
    sids = quickstart.netlink("p1s1").end_sid_counters()
    assert list(sids) == [IPv6Network("fcbb:bb01:e101::/48")]
    assert sids[IPv6Network("fcbb:bb01:e101::/48")]["next_csid"]
    text = quickstart.node("p1s1").cmd("ip -6 route show fcbb:bb01:e101::/48")
    assert "seg6local action End flavors next-csid lblen 32 nflen 16 dev sid0" in text


def test_a_closed_fabric_leaves_no_descriptors_open(tmp_path: Path):
    """A drill builds its 60 fabrics in one process: each closed fabric had left its nodes' pty
    ends open (and more), until select() failed on a descriptor past 1024 at run 60."""
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    build("name: quickstart", tmp_path).close()  # what stays open for good (imports, maps)
    first = open_fds()
    for _ in range(2):
        build("name: quickstart", tmp_path).close()
    assert open_fds() <= first + 2, f"{open_fds() - first} descriptors more after 2 fabrics"
