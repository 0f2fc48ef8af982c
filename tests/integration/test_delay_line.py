"""Link latency on a built fabric: the agents hold what their peers send for the latency in
their configs, so a one-packet write, which completes on its ACK, takes the fabric's round trip
plus twice that latency; netem on every link (fabric.latency_by: netem) gives the same times."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hostagent.runtime import driver
from testbed import scenario as scenario_mod
from testbed.fabric.latency import peer_latency
from testbed.fabric.plan import make_plan
from testbed.kernel import features
from testbed.run import traffic

from .helpers import build

# 4 ranks on 2 leaves at 25 Mbit/s; a 4 KiB all-reduce: every ring step one 1 KiB packet
TEXT = """name: latency
fabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}}
workload: {collective: all_reduce, size: 4KiB, iterations: 3, warmup: 0}
transport: [mrc]
"""
LATENCY = 0.025  # s one way, emulated
# what a write's time may exceed 2 x LATENCY by: the fabric's round trip for a lone packet
# (tens of us: idle shapers pass it at once, their buckets full), the receiver's ACK delay
# (0.5 ms), each end's loop waking up to 1 ms late (epoll) and the agents' work on a loaded
# machine
TOLERANCE = 0.005 * float(os.environ.get("MRC_TESTBED_TIMING_SCALE", "1"))
# (scaled where the CPU is emulated, e.g. `make stock-kernel-test`: the agents' loop wakes late)


def test_a_one_packet_write_takes_the_round_trip_plus_twice_the_latency(tmp_path: Path,
                                                                        monkeypatch):
    made = traffic.agent_configs

    def with_latency(*args, **kwargs):
        configs = made(*args, **kwargs)
        for cfg in configs.values():
            for peer in cfg.peers:
                peer.latency = LATENCY
        return configs
    monkeypatch.setattr(traffic, "agent_configs", with_latency)
    network = build(TEXT, tmp_path)
    try:
        sc = scenario_mod.parse(TEXT, "test")
        outcomes = traffic.run_agents(network, sc, "mrc", tmp_path / "agents")
    finally:
        network.close()
    assert all(o.result["status"] == "ok" for o in outcomes), [o.result for o in outcomes]
    times = [m["end"] - m["start"] for o in outcomes for m in json.loads(
        (tmp_path / "agents" / o.host / "messages.json").read_text())]
    # each end may release a held packet up to RELEASE_EARLY before it is due
    held = 2 * (LATENCY - driver.RELEASE_EARLY)
    assert times and min(times) >= held, "a write came back sooner than the latency allows"
    assert min(times) == pytest.approx(2 * LATENCY, abs=TOLERANCE), sorted(times)[:5]


# the same fabric with 5 ms a link from the scenario: one way 10 ms between hosts of a leaf,
# 20 ms across a spine; the ring's writes alternate between the two
BY_SCENARIO = TEXT.replace("fabric_link: {rate: 25Mbit}", "fabric_link: {rate: 25Mbit}, "
                           "hop_latency: 5ms, latency_by: %s")


@pytest.mark.parametrize("mode", ["agents", "netem"])
def test_a_write_takes_the_same_time_whichever_way_the_links_are_delayed(mode: str,
                                                                        tmp_path: Path):
    """The two ways of delaying differ only in where upstream flows meet a queue; a lone
    packet and its ACK must take the same time either way: twice its path's one-way latency
    (per pair of ranks, so that each kind of path is compared)."""
    if mode == "netem" and features.probe_kernel()["netem"] is not True:
        pytest.skip("this kernel has no sch_netem: latency_by: netem cannot run here")
    text = BY_SCENARIO % mode
    sc = scenario_mod.parse(text, "test")
    plan = make_plan(sc)
    hosts = sc.rank_hosts()
    network = build(text, tmp_path)
    try:
        outcomes = traffic.run_agents(network, sc, "mrc", tmp_path / "agents")
    finally:
        network.close()
    assert all(o.result["status"] == "ok" for o in outcomes), [o.result for o in outcomes]
    fastest: dict[tuple[str, str], float] = {}
    for o in outcomes:
        for m in json.loads((tmp_path / "agents" / o.host / "messages.json").read_text()):
            pair = (o.host, hosts[m["peer"]])
            fastest[pair] = min(fastest.get(pair, 1e9), m["end"] - m["start"])
    assert len(fastest) == 4, fastest
    early = driver.RELEASE_EARLY if mode == "agents" else 0.0  # netem never releases early
    for (src, dst), took in fastest.items():
        one_way = peer_latency(plan, src, dst)
        assert one_way in (pytest.approx(0.010), pytest.approx(0.020))
        assert took >= 2 * (one_way - early), (src, dst, took)
        assert took == pytest.approx(2 * one_way, abs=TOLERANCE), (src, dst, took)
