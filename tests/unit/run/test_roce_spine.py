"""Which spine a RoCEv2 QP crossed, read after the agents stopped (traffic.roce_spine), with
a fake network: the spine whose port facing the source leaf counted the probes, and None when
the host cannot send them at all. A run whose QP failed on a host port fault now ends while
that port is still down: the probe's sendto raised ENETUNREACH and the runner crashed
(`internal error: OSError: [Errno 101] Network is unreachable`, measured on quickstart with
h0's plane-0 port down for 10 s)."""
from __future__ import annotations

import errno
import json
from pathlib import Path
from types import SimpleNamespace

from testbed import scenario
from testbed.fabric.plan import make_plan
from testbed.run.traffic import PATH_PROBES, add_roce_spines, roce_spine


class FakeNetwork:
    """Probes sent from a host arrive at spine `lands_on` of the plane (or raise `refuse`)."""

    def __init__(self, lands_on: int, refuse: OSError | None = None) -> None:
        self.plan = make_plan(scenario.parse("name: q", "x"))
        self.lands_on, self.refuse = lands_on, refuse
        self.counts: dict[tuple[str, str], int] = {}

    def rx_packets(self, node: str, ifname: str) -> int:
        return self.counts.get((node, ifname), 0)

    def send_udp(self, host: str, src: str, sport: int, dst: str, dport: int,
                 count: int) -> None:
        if self.refuse is not None:
            raise self.refuse
        spine = self.plan.spines[0][self.lands_on]
        port = self.plan.port_to(spine, self.plan.leaf_of(host, 0)).ifname
        self.counts[(spine, port)] = self.counts.get((spine, port), 0) + count


def _cross_leaf_pair(plan) -> tuple[str, str]:
    hosts = [n for n, node in plan.nodes.items() if node.role == "host"]
    return next((a, b) for a in hosts for b in hosts
                if plan.leaf_of(a, 0) != plan.leaf_of(b, 0))


def test_the_spine_that_counted_the_probes():
    net = FakeNetwork(lands_on=1)
    host, peer = _cross_leaf_pair(net.plan)
    spine = roce_spine(net, host, peer, 0, 12345)
    assert spine == net.plan.nodes[net.plan.spines[0][1]].index
    assert sum(net.counts.values()) == PATH_PROBES


def test_a_host_that_cannot_send_has_no_spine_rather_than_an_error():
    net = FakeNetwork(lands_on=0, refuse=OSError(errno.ENETUNREACH, "Network is unreachable"))
    host, peer = _cross_leaf_pair(net.plan)
    assert roce_spine(net, host, peer, 0, 12345) is None


def test_only_the_qps_that_sent_data_are_probed(tmp_path: Path):
    """A ring uses 2 of a rank's peers: its idle QPs get no spine and cost no probes."""
    net = FakeNetwork(lands_on=1)
    host, peer = _cross_leaf_pair(net.plan)
    (tmp_path / host).mkdir()
    qps = [{"peer": 1, "plane": 0, "sport": 1000 + k, "data_sent": sent}
           for k, sent in enumerate((5, 0, 7))]
    (tmp_path / host / "paths.json").write_text(json.dumps({"qps": qps}))
    cfg = SimpleNamespace(peers=[SimpleNamespace(rank=1, host=peer)])
    add_roce_spines(net, tmp_path, {host: cfg})
    report = json.loads((tmp_path / host / "paths.json").read_text())
    spines = [q.get("spine") for q in report["qps"]]
    assert spines == [net.plan.nodes[net.plan.spines[0][1]].index, None,
                      net.plan.nodes[net.plan.spines[0][1]].index]
    assert sum(net.counts.values()) == 2 * PATH_PROBES
