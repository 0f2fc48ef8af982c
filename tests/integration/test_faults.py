"""Faults on a real fabric: each has a measurable effect, and is undone when it ends."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pandas as pd
import pytest

from testbed import scenario as scenario_mod
from testbed.emulation.injector import Injector
from testbed.fabric.timeline import Action, schedule
from testbed.run.runner import fabric

from .helpers import iperf3_tcp_mbps, run_scenario

QUICK = "name: f\nfabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}}\n"


def lost(ping_output: str) -> int:
    sent, received = map(int, re.search(r"(\d+) packets transmitted, (\d+) received",
                                        ping_output).groups())
    return sent - received


def test_loss_matches_the_requested_rate_and_is_undone():
    sc = scenario_mod.parse(QUICK, "test")
    with fabric(sc) as network:
        injector = Injector(network, [], [])
        loss = Action(0, True, "loss", ("h0-p0l0",), 0,
                      (("probability", 0.2), ("direction", "up")))
        injector.apply(loss)
        # 500 pings h0 -> h1 over plane 0: requests cross the lossy direction, replies do not
        out = network.node("h0").cmd("ping -q -c 500 -i 0.002 -W 1 fd10::101")
        assert 64 <= lost(out) <= 136, f"20% of 500 is 100 +- 36 (4 sigma): {out}"
        injector.apply(Action(1, False, "loss", ("h0-p0l0",), 0, loss.params))
        assert lost(network.node("h0").cmd("ping -q -c 200 -i 0.002 -W 1 fd10::101")) == 0
        injector.stop()


def test_link_down_carries_nothing_until_it_comes_back(tmp_path: Path, results_dir: Path):
    (run,) = run_scenario("""name: down
fabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}, mtu: 4200}
qp: {mss: 4096}
transport: [mrc]
workload: {size: 1MiB, iterations: 8, warmup: 0}
faults: [{at: 0.3, kind: link_down, target: {plane: 0, leaf: 1, spine: 0}, duration: 0.8}]
""", tmp_path, results_dir)
    events = pd.read_parquet(run / "events.parquet")
    assert set(events.condition) == {"down", "routed"}  # routing's echo, a delay later
    events = events[events.condition == "down"]
    steps = list(zip(events["on"], events.condition, strict=True))
    assert steps == [(True, "down"), (False, "down")]
    assert (events.lag.abs() < 0.25).all(), events
    down_at, up_at = events.applied.tolist()
    links = pd.read_parquet(run / "links.parquet")
    port = links[(links.node == "p0l1") & (links.link == "p0l1-p0s0")].sort_values("time")
    during = port[(port.time > down_at + 0.05) & (port.time < up_at - 0.05)]
    assert len(during) >= 3 and during.tx_bytes.nunique() == 1, "the down link sent nothing"
    after = port[port.time > up_at + 0.3]
    assert after.tx_bytes.max() > during.tx_bytes.max(), "traffic came back after link_up"
    assert pd.read_parquet(run / "iterations.parquet").verified.all()


def test_baseline_routing_converges_around_a_link_and_back():
    sc = scenario_mod.parse(QUICK, "test")
    with fabric(sc) as network:
        injector = Injector(network, [], [])
        leaf, spine = network.node("p0l0"), network.node("p0s0")
        assert leaf.cmd("ip -6 route show fd10:0:1::/64").count("nexthop via") == 2
        injector.apply(Action(0, True, "routed", ("p0l0-p0s0",), 0))
        converged = leaf.cmd("ip -6 route show fd10:0:1::/64")
        assert "via fd20:0:5::2 dev p0l0-eth3 proto bgp" in converged, converged
        assert "nexthop" not in converged
        assert spine.cmd("ip -6 route show fd10::/64").strip() == ""
        assert "p0l0-eth2" in leaf.cmd("ip -6 route show fcbb:bb00:e000::/48"), "MRC's stay"
        injector.apply(Action(1, False, "routed", ("p0l0-p0s0",), 0))
        assert leaf.cmd("ip -6 route show fd10:0:1::/64").count("nexthop via") == 2
        assert "fd20:0:4::1" in spine.cmd("ip -6 route show fd10::/64")


def rtt_ms(ping_output: str) -> float:
    """The mean round trip of a ping's summary line."""
    return float(re.search(r"= [\d.]+/([\d.]+)/", ping_output).group(1))


def test_delay_adds_to_the_links_round_trip_and_is_undone():
    """20 ms a way on h0's plane-0 link (both ports' data FIFOs): h0 -> h1 over plane 0 crosses
    it both ways, so its round trip grows by 40 ms; undone, it is back under a millisecond or
    so. Needs netem (skips without it; `make stock-kernel-test` runs it)."""
    from testbed.kernel import features
    if features.probe_kernel()["netem"] is not True:
        pytest.skip("this kernel has no sch_netem: the delay fault cannot run here")
    sc = scenario_mod.parse(QUICK, "test")
    with fabric(sc) as network:
        injector = Injector(network, [], [])
        delay = Action(0, True, "delay", ("h0-p0l0",), 0, (("delay", 0.02),))
        before = rtt_ms(network.node("h0").cmd("ping -q -c 20 -i 0.05 fd10::101"))
        injector.apply(delay)
        during = rtt_ms(network.node("h0").cmd("ping -q -c 20 -i 0.05 fd10::101"))
        injector.apply(Action(1, False, "delay", ("h0-p0l0",), 0, delay.params))
        after = rtt_ms(network.node("h0").cmd("ping -q -c 20 -i 0.05 fd10::101"))
        injector.stop()
    assert 40 <= during - before <= 40 * 1.25 + 5, (before, during, after)
    assert after < before + 5, (before, during, after)


def test_degrade_lowers_the_rate_and_is_undone():
    sc = scenario_mod.parse("name: d\nfabric: {host_link: {rate: 40Mbit}}\n", "test")
    with fabric(sc) as network:
        injector = Injector(network, [], [])
        degrade = Action(0, True, "degrade", ("h0-p0l0",), 0, (("fraction", 0.25),))

        def tcp_mbps() -> float:
            return iperf3_tcp_mbps(network, "h0", "h1", "fd10::101")

        leaf_port = network.plan.port_to("p0l0", "h0").ifindex

        def queue_rate() -> int:  # bytes/s the leaf port's eBPF virtual queue drains at
            return network.queues.config(leaf_port).rate

        full = queue_rate()
        injector.apply(degrade)
        assert 7 <= tcp_mbps() <= 10.4, "a quarter of 40 Mbit/s"
        assert queue_rate() == full // 4, "the switch queue drains at the new rate too"
        injector.apply(Action(1, False, "degrade", ("h0-p0l0",), 0, degrade.params))
        assert tcp_mbps() >= 34 and queue_rate() == full


def test_router_down_drops_on_all_its_links():
    sc = scenario_mod.parse(QUICK, "test")
    with fabric(sc) as network:
        from testbed.fabric.timeline import links_of
        from testbed.scenario.faults import Target
        links = links_of(network.plan, Target(router="p0l0"))
        assert set(links) == {"h0-p0l0", "h1-p0l0", "p0l0-p0s0", "p0l0-p0s1"}
        injector = Injector(network, [], [])
        injector.apply(Action(0, True, "down", links, 0))
        assert lost(network.node("h0").cmd("ping -q -c 5 -i 0.01 -W 1 fd10::101")) == 5
        assert lost(network.node("h0").cmd("ping -q -c 5 -i 0.01 -W 1 fd10:1::101")) == 0
        injector.apply(Action(1, False, "down", links, 0))
        assert lost(network.node("h0").cmd("ping -q -c 5 -i 0.01 -W 1 fd10::101")) == 0
        injector.stop()


def test_incast_background_fills_the_receivers_port(tmp_path: Path, results_dir: Path):
    (run,) = run_scenario("""name: incast
fabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}, mtu: 4200}
qp: {mss: 4096}
transport: [mrc]
workload: {size: 1MiB, iterations: 10, warmup: 0}
background:
  - {pattern: incast, at: 0.2, duration: 1, kind: udp, rate: 15Mbit, receiver: h0,
     plane: 0}
""", tmp_path, results_dir)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["background"] == {"flows": 3, "started": 3, "ran": 3, "failed": []}
    lost = sent = 0
    for k in range(3):
        client = json.loads((run / "background" / f"flow{k}-client.json").read_text())
        assert client["start"]["test_start"]["protocol"] == "UDP"
        server = json.loads((run / "background" / f"flow{k}-server.json").read_text())
        lost += server["end"]["sum"]["lost_packets"]
        sent += server["end"]["sum"]["packets"]
    # 45 Mbit/s into 25 lose 44%; tail drop need not spread it evenly over the flows
    assert lost / sent > 0.25, f"3 x 15 Mbit/s into a 25 Mbit/s port lost {lost}/{sent}"
    began = json.loads((run / "background" / "flows.json").read_text())[0]["started"]
    links = pd.read_parquet(run / "links.parquet")
    port = links[(links.node == "p0l0") & (links.ifname == "p0l0-eth0")].sort_values("time")
    window = port[(port.time > began + 0.2) & (port.time < began + 0.9)]  # inside the incast
    mbps = (window.tx_bytes.iloc[-1] - window.tx_bytes.iloc[0]) * 8 / (
        window.time.iloc[-1] - window.time.iloc[0]) / 1e6
    assert mbps > 20, f"h0's plane-0 port ran at {mbps:.1f} Mbit/s during the incast"


def test_every_dropping_kind_silences_its_links_for_its_window(tmp_path: Path,
                                                               results_dir: Path):
    """blackhole, flap, router_reboot and plane_down on one timeline during MRC traffic: in
    each window (from events.parquet) every port of the affected links sends nothing, and the
    links carry traffic again after it; every rank still verifies."""
    (run,) = run_scenario("""name: kinds
fabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}, mtu: 4200}
qp: {mss: 4096}
transport: [mrc]
workload: {size: 1MiB, iterations: 12, warmup: 0}
faults:
  - {at: 0.3, kind: blackhole, target: {plane: 0, leaf: 0, spine: 0}, duration: 0.6}
  - {at: 0.3, kind: flap, target: {host: h1, plane: 1}, period: 0.8, count: 2}
  - {at: 1.2, kind: router_reboot, target: {router: p1s1}, duration: 0.6}
  - {at: 2.0, kind: plane_down, target: {plane: 0}, duration: 0.6}
""", tmp_path, results_dir)
    events = pd.read_parquet(run / "events.parquet")
    events = events[events.condition.isin(["down", "blackhole"])]
    links = pd.read_parquet(run / "links.parquet")
    checked = set()
    for _event, group in events.sort_values("applied").groupby("event"):
        group = group.reset_index(drop=True)
        for k in range(0, len(group) - 1, 2):
            start, end = group.loc[k], group.loc[k + 1]
            assert start["on"] and not end["on"], group
            for link in start["links"]:
                ports = links[links.link == link]
                # from when every node had the rule (`applied` is recorded after the last)
                # to when the undoing began (the first node may be restored at once)
                during = ports[(ports.time > start.applied + 0.05)
                               & (ports.time < end.scheduled - 0.02)]
                sent = during.groupby("ifname").tx_bytes.agg(lambda s: s.max() - s.min())
                assert len(during) and (sent == 0).all(), (start.kind, link, sent)
                checked.add(start.kind)
    assert checked == {"blackhole", "flap", "router_reboot", "plane_down"}
    final = links.sort_values("time").groupby("link").tx_bytes.last()
    assert (final[final.index.str.startswith("p0")] > 0).all()
    assert pd.read_parquet(run / "iterations.parquet").verified.all()


LAG_BOUND = 0.050  # s
LOSS_LAG_BOUND = 0.15  # s


def test_a_plane_down_of_24_links_changes_them_all_within_a_few_ms():
    """Every link of one action is dropped within a few ms of the scheduled time and of each
    other (each node's ruleset prepared ahead and applied by its own thread, in parallel): a
    plane of 2 x (4 leaves + 4 spines) with 8 hosts has 8 host links and 16 fabric links
    over 16 nodes. Before, one `nft` process per node in turn took 0.34 s for this."""
    losses = ", ".join(f"{{at: 0.1, kind: loss, target: {{plane: 0, leaf: {leaf}, spine: "
                       f"{spine}}}, probability: 0.01, duration: 0.05}}"
                       for leaf in range(4) for spine in range(4))
    sc = scenario_mod.parse(
        "name: p\nfabric: {planes: 2, leaves_per_plane: 4, spines_per_plane: 4, "
        "hosts_per_leaf: 2}\nfaults: [{at: 0.3, kind: plane_down, target: {plane: 1}, "
        "duration: 0.4}, {at: 0.2, kind: flap, target: {host: h0, plane: 1}, period: 0.2, "
        f"count: 3}}, {losses}]\n", "test")
    with fabric(sc) as network:
        actions = schedule(network.plan, sc.faults, 10.0)  # routing's echo after the end
        injector = Injector(network, sc.faults, actions)
        try:
            t0 = time.time() + 1.0
            injector.start(t0)
            time.sleep(max(0.0, t0 + 1.0 - time.time()))
            # h0's plane-1 port: the flap's "up" at 0.4 s is inside the plane's down window
            out = network.node("h0").cmd("nft list table inet mrc_faults")
        finally:
            injector.stop()
    rows = pd.DataFrame(injector.rows)
    # 16 losses due at one instant, one per link: each node applies its share as one
    # transaction. Their first application, 16 rulesets with random drops prepared at once,
    # was measured at 77-91 ms of lag (the last node; the first at 20-25 ms) on the project's
    # 2 cores idle, undoing them at 30-42 ms: bounded at 0.15 s, half of applying them in turn
    loss = rows[rows.condition == "loss"]
    assert len(loss) == 32 and (loss["lag"] < LOSS_LAG_BOUND).all(), (
        loss[["on", "lag", "spread"]])
    rows = rows[rows.condition == "down"]
    plane = rows[rows.event == 0]
    assert [len(links) for links in plane["links"]] == [24, 24]
    assert plane["applied"].notna().all(), rows
    # measured here without traffic: lag 3.5 ms, spread 3.3 ms; bounds with room for a loaded
    # 2-core machine (10.6 ms seen with 5 other test runs on it, 38 ms for the first action of
    # a run on a loaded CI machine), still 6x under the 0.27-0.34 s that applying links one by
    # one took
    assert (plane["lag"] < LAG_BOUND).all() and (plane["spread"] < LAG_BOUND).all(), (
        plane[["on", "lag", "spread"]])
    flap = rows[rows.event == 1]
    assert len(flap) == 6 and (flap["lag"] < LAG_BOUND).all(), flap[["scheduled", "lag"]]
    assert "drop" not in out, "everything undone at the end"


def test_overlapping_faults_hold_a_link_until_the_last_lets_go():
    """A flap's "up" while its plane is down leaves the port down; routing stays around a
    link while any fault that took it down has converged."""
    sc = scenario_mod.parse(QUICK, "test")
    with fabric(sc) as network:
        injector = Injector(network, [], [])
        try:
            plane0 = tuple(link.name for link in network.plan.links if link.plane == 0)
            injector.apply(Action(0, True, "down", plane0, 0))
            injector.apply(Action(0, True, "down", ("h0-p0l0",), 1))
            injector.apply(Action(0, False, "down", ("h0-p0l0",), 1))
            assert lost(network.node("h0").cmd("ping -q -c 5 -i 0.01 -W 1 fd10::101")) == 5
            injector.apply(Action(0, False, "down", plane0, 0))
            assert lost(network.node("h0").cmd("ping -q -c 5 -i 0.01 -W 1 fd10::101")) == 0

            leaf = network.node("p0l0")
            injector.apply(Action(0, True, "routed", ("p0l0-p0s0",), 0))
            injector.apply(Action(0, True, "routed", ("p0l0-p0s0",), 1))
            injector.apply(Action(0, False, "routed", ("p0l0-p0s0",), 1))
            assert "nexthop" not in leaf.cmd("ip -6 route show fd10:0:1::/64"), (
                "fault 0 still holds the link: routing stays around it")
            injector.apply(Action(0, False, "routed", ("p0l0-p0s0",), 0))
            assert leaf.cmd("ip -6 route show fd10:0:1::/64").count("nexthop via") == 2
        finally:
            injector.stop()


def test_link_up_brings_back_a_link_down_without_duration():
    sc = scenario_mod.parse(QUICK + "faults: [{at: 0, kind: link_down, target: {host: h0, "
                            "plane: 0}}, {at: 0.2, kind: link_up, target: {host: h0, "
                            "plane: 0}}]\n", "test")
    with fabric(sc) as network:
        actions = [a for a in schedule(network.plan, sc.faults) if a.condition == "down"]
        injector = Injector(network, sc.faults, actions)
        try:
            injector.apply(actions[0])
            assert lost(network.node("h0").cmd("ping -q -c 5 -i 0.01 -W 1 fd10::101")) == 5
            injector.apply(actions[1])
            assert lost(network.node("h0").cmd("ping -q -c 5 -i 0.01 -W 1 fd10::101")) == 0
        finally:
            injector.stop()
