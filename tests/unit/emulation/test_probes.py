"""The probe datagram and its receive loop (shared by verification and the server agents), on
this namespace's loopback, and the judging of one arrival."""
from __future__ import annotations

import select
import socket
from ipaddress import IPv6Address

import pytest

from testbed import scenario
from testbed.emulation import probes
from testbed.fabric import paths
from testbed.fabric.plan import make_plan


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch):
    # the namespace of this process, without entering it (which takes root)
    monkeypatch.setattr(probes.netns, "socket_in",
                        lambda _pid, family, kind, proto=0: socket.socket(family, kind, proto))
    sock = probes.receiver(0)
    yield sock
    sock.close()


def test_the_receive_loop_yields_this_rounds_probes_with_where_they_arrived(receiver):
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sender:
        for data in (probes.payload(5, 3), probes.payload(4, 9),  # an earlier round's
                     b"MRCq" + probes.payload(5, 8)[4:],  # another program's magic
                     b"short", probes.payload(5, 7)):
            sender.sendto(data, ("::1", probes.PROBE_PORT))
        select.select([receiver], [], [], 1.0)
        lo = socket.if_nametoindex("lo")
        assert list(probes.receive(receiver, 5)) == [(3, IPv6Address("::1"), lo),
                                                     (7, IPv6Address("::1"), lo)]
        assert list(probes.receive(receiver, 5)) == []  # drained: it returns, not blocks


def test_an_arrival_is_counted_and_judged_a_later_good_copy_wins():
    plan = make_plan(scenario.parse("name: t\nfabric: {}\n", "x"))
    evs = [ev for ev in paths.all_evs(plan) if ev.src != ev.dst][:2]
    ifindex = {(h, p): plan.ports(h)[p].ifindex for h in plan.hosts for p in range(plan.planes)}
    job = probes.ProbeJob(plan, {}, ifindex, evs, 1.0, 0)
    out = probes.ProbeOutcome()
    ev = evs[0]
    good = plan.srv6_address(ev.dst, ev.plane)
    right_port = ifindex[(ev.dst, ev.plane)]
    probes.arrived(job, out, 0, ev.dst, ev.address, right_port)
    assert out.seen[0] == f"arrived with destination {ev.address} (uSIDs not all consumed)"
    probes.arrived(job, out, 0, ev.dst, good, right_port + 1000)
    assert out.seen[0] == "arrived on the port of another plane"
    probes.arrived(job, out, 0, ev.dst, good, right_port)
    assert out.seen[0] is None
    probes.arrived(job, out, 0, ev.src, good, right_port)  # a stray copy later: still proven
    assert out.seen[0] is None
    probes.arrived(job, out, 2, ev.dst, good, right_port)  # not an EV of the job
    probes.arrived(job, out, -1, ev.dst, good, right_port)
    assert out.received == {0: 4} and out.datagrams == 4 and 1 not in out.seen
