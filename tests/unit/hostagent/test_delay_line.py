"""The receive path's delay line (hostagent/runtime/delay_line.py): datagrams held for their
peer's latency, in order, released together when due, their CE marks with them; a latency of 0
is the QP's own receive. On the simnet, the RTT the QPs measure rises by twice the latency;
an agent holds what its peers send for the latency its config gives them."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import socket
import time
from pathlib import Path

import pytest

from hostagent.protocol.dcqcn import REFERENCE_RTT
from hostagent.protocol.evs import EVPolicy, EVState
from hostagent.protocol.qp import QPConfig, WriteDone
from hostagent.protocol.rocev2 import RoceQP
from hostagent.runtime import agent, driver, pooled
from hostagent.runtime.config import AgentConfig, PeerConfig, WorkloadConfig
from hostagent.runtime.delay_line import DelayLine

from .simnet import PathModel, SimNet
from .test_transport import mrc_pair, roce_pair

Got = list[tuple[str, bytes, float, bool]]


def _receiver(name: str, got: Got):
    def receive(datagram: bytes, now: float, ecn: bool = False) -> None:
        got.append((name, datagram, now, ecn))
    return receive


def test_a_latency_of_zero_is_the_qps_own_receive():
    got: Got = []
    receive = _receiver("a", got)
    line = DelayLine()
    assert line.inlet(0.0, 1, receive) is receive
    assert line.fifos == [], "nothing to hold, nothing to time"


def test_datagrams_wait_their_latency_and_leave_in_arrival_order_with_their_marks():
    got: Got = []
    line = DelayLine()
    a = line.inlet(0.010, 1, _receiver("a", got))
    b = line.inlet(0.010, 2, _receiver("b", got))
    assert len(line.fifos) == 1, "peers of one latency share a FIFO, so one timer"
    a(b"1", 1.000, True)
    b(b"2", 1.002, False)
    a(b"3", 1.004, False)
    assert line.due(0) == pytest.approx(1.010)
    touched: set[int] = set()
    line.release(0, 1.0099, touched)
    assert got == [] and touched == set(), "nothing before its due time"
    line.release(0, 1.0125, touched)
    assert got == [("a", b"1", 1.0125, True), ("b", b"2", 1.0125, False)]
    assert touched == {1, 2}
    assert line.due(0) == pytest.approx(1.014), "the next head's due time is the next wake"
    line.release(0, 1.014, touched)
    assert got[-1] == ("a", b"3", 1.014, False)
    assert line.due(0) is None


def test_what_is_due_together_is_released_in_one_call():
    got: Got = []
    line = DelayLine()
    hold = line.inlet(0.005, 7, _receiver("a", got))
    for k in range(5):
        hold(bytes([k]), 2.0 + k * 1e-4, k % 2 == 0)
    line.release(0, 2.006, set())
    assert [d for _, d, _, _ in got] == [bytes([k]) for k in range(5)]
    assert {now for _, _, now, _ in got} == {2.006}, "one batch, one time"
    assert [ecn for _, _, _, ecn in got] == [True, False, True, False, True]


def test_an_early_release_takes_what_is_due_that_soon_and_no_more():
    """A wake-up at 1.0095 with 0.5 ms of early release hands over the datagram due at 1.010,
    at the wake's time, and keeps the one due at 1.0102."""
    got: Got = []
    line = DelayLine()
    hold = line.inlet(0.010, 1, _receiver("a", got))
    hold(b"1", 1.000, False)
    hold(b"2", 1.0002, False)
    line.release(0, 1.0095, set(), early=0.0005)
    assert got == [("a", b"1", 1.0095, False)]
    assert line.due(0) == pytest.approx(1.0102)


def test_each_latency_has_its_own_fifo_and_wake():
    got: Got = []
    line = DelayLine()
    near = line.inlet(0.002, 1, _receiver("near", got))
    far = line.inlet(0.008, 2, _receiver("far", got))
    far(b"f", 0.0, False)
    near(b"n", 0.001, False)
    assert [line.due(k) for k in range(2)] == pytest.approx([0.003, 0.008])  # made in order
    line.release(0, 0.003, set())
    assert [name for name, *_ in got] == ["near"], "the near peer's datagram overtakes"


def test_a_receive_that_raises_leaves_the_rest_held():
    got: Got = []
    line = DelayLine()

    def raising(datagram: bytes, now: float, ecn: bool = False) -> None:
        raise RuntimeError("a receive failed")

    bad = line.inlet(0.001, 1, raising)
    good = line.inlet(0.001, 2, _receiver("good", got))
    bad(b"x", 0.0, False)
    good(b"y", 0.0, False)
    with pytest.raises(RuntimeError):
        line.release(0, 0.001, set())
    assert line.due(0) == pytest.approx(0.001), "still held, due now: released next time"
    line.release(0, 0.001, set())
    assert [d for _, d, _, _ in got] == [b"y"]


@pytest.mark.parametrize("latency", [-0.001, math.nan])
def test_a_latency_below_zero_is_refused(latency):
    with pytest.raises(ValueError, match="0 or more"):
        DelayLine().inlet(latency, 1, _receiver("a", []))


# ---- on the simnet: what the QPs measure -----------------------------------------------------

PATH_LATENCY = 0.001  # s one way, the network's own (no jitter, no queue)
HOLD = 0.004  # s each receive path holds every datagram
# RTTs long beside the test module's 2 ms ACK timeout: a timeout above them, so no resends
CFG = QPConfig(mss=256, init_cwnd=4 * 1024, max_cwnd=16 * 1024, timeout=0.1, linear_cnt=7,
               exp_cnt=4, base_rtt=REFERENCE_RTT)


def _net(transport: str, hold: float) -> tuple[SimNet, bytearray]:
    """A QP pair on paths of PATH_LATENCY each way, every datagram held `hold` at both ends;
    the receiver's buffer."""
    if transport == "mrc":
        a, b, bufs = mrc_pair(64 * 1024, cfg=CFG)
    else:
        a, b, bufs = roce_pair(64 * 1024)
        a.cfg = b.cfg = dataclasses.replace(a.cfg, timeout=CFG.timeout)
    net = SimNet(a, b, seed=3, hold=hold)
    for side in "ab":
        for ev in range(8):
            net.paths[(side, ev)] = PathModel(latency=PATH_LATENCY, jitter=0.0)
    return net, bufs[1]


def _srtt(transport: str, hold: float) -> float:
    """The sender's smoothed RTT after 64 KiB of writes."""
    net, received = _net(transport, hold)
    a = net.a
    data = bytes(range(256)) * 256
    for k in range(4):
        a.post_write(k, memoryview(data)[k * 16384:(k + 1) * 16384], k * 16384, None, 0.0, 2)
    net.run(lambda: sum(isinstance(e, WriteDone) for e in a.events) == 4, until=5.0)
    assert bytes(received) == data and a.counters.retransmits == 0
    return a.cc.srtt


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_the_rtt_the_qps_measure_rises_by_twice_the_held_time(transport):
    """Tolerance: 2% of the rise, and the 1 us of the header's send-time stamp (each way)."""
    assert _srtt(transport, HOLD) - _srtt(transport, 0.0) == pytest.approx(
        2 * HOLD, rel=0.02, abs=2e-6)


def test_probe_replies_are_held_too():
    """An EV condemned while dead is probed once repaired: each probe's round trip is the
    paths' latency and the held time, both ways (within the stamp's 1 us each way)."""
    net, _ = _net("mrc", HOLD)
    a = net.a
    a.post_write(0, memoryview(bytes(16384)), 0, None, 0.0, 2)
    net.paths[("a", 3)] = PathModel(dead=True)
    net.run(lambda: a.evset.by_index(3).state is EVState.ASSUMED_BAD, until=5.0)
    net.paths[("a", 3)] = PathModel(latency=PATH_LATENCY, jitter=0.0)
    net.run(lambda: len(a.evset.by_index(3).probe_rtts) >= 3, until=net.now + 5.0)
    assert a.evset.by_index(3).probe_rtts[:3] == pytest.approx(
        [2 * (PATH_LATENCY + HOLD)] * 3, abs=2e-6)


# ---- an agent: the latency of its config's peers ---------------------------------------------

AGENT_LATENCY = 0.05  # s one way, far above loopback's


def _loopback_agents(tmp: Path, monkeypatch) -> list[AgentConfig]:
    """Two RoCEv2 hosts over loopback UDP (build_qps replaced: no namespaces, no root), each
    peer at AGENT_LATENCY in the other's config."""
    start = tmp / "start"
    start.write_text(repr(time.time()))
    listens = [driver.listen_socket(("::1", 0)) for _ in range(2)]

    def build(cfg: AgentConfig):
        peer = 1 - cfg.rank
        ours, theirs = driver.qpn(cfg.rank, peer, 0)
        qp = RoceQP(ours, theirs, memoryview(bytearray(0)), cfg.qp, seed=cfg.rank)
        sock = driver.ecn_socket(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
        route = driver.Route(sock, {0: ("::1", listens[peer].getsockname()[1])}, {0: 0})
        return listens[cfg.rank], {peer: [(qp, route)]}
    monkeypatch.setattr(agent, "build_qps", build)
    configs = []
    for rank in (0, 1):
        (tmp / f"h{rank}").mkdir()
        peer = PeerConfig(1 - rank, f"h{1 - rank}", [], ["::1"], [], latency=AGENT_LATENCY)
        configs.append(AgentConfig(
            rank=rank, world=2, host=f"h{rank}", transport="rocev2", plain=["::1"],
            peers=[peer], qps_per_peer=1, qp=QPConfig(mss=1024, timeout=1.0,
                                                      base_rtt=REFERENCE_RTT), mrc=EVPolicy(),
            seed=1, start_file=str(start), out_dir=str(tmp / f"h{rank}"), timeout=30.0,
            workload=WorkloadConfig("all_reduce", 16 * 1024, 1, 0)))
    return configs


def test_an_agent_holds_what_its_peers_send_for_their_configured_latency(tmp_path, monkeypatch):
    """A write completes when its last packet is acknowledged: a round trip, so every write
    of the agents' all-reduce takes at least twice the peers' latency."""
    configs = _loopback_agents(tmp_path, monkeypatch)
    results = asyncio.run(pooled.serve([(c, None) for c in configs]))
    assert [r["status"] for r in results] == ["ok", "ok"]
    for host in ("h0", "h1"):
        messages = json.loads((tmp_path / host / "messages.json").read_text())
        assert messages and all(m["end"] - m["start"] >= 2 * AGENT_LATENCY for m in messages)
