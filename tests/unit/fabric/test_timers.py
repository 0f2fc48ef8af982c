"""Transport timers in the scenario's frame: the specifications' defaults in the real frame, run
D times longer; the small regime's as before; compression above a number of base RTTs, each
one a departure; and the refusal of timers no run could wait out. Every number by hand from the
specifications and the scenario's own values."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import ScenarioError
from testbed.fabric import timers as timers_
from testbed.fabric.plan import make_plan
from testbed.fabric.timers import timers
from testbed.run.traffic import agent_configs
from testbed.scenario import parse

D = 100e9 / 25e6  # 4,000
REAL = """name: rt
fabric: {planes: 2, leaves_per_plane: 2, spines_per_plane: 2, hosts_per_leaf: 2,
         host_link: {rate: 25Mbit}, fabric_link: {rate: 50Mbit}, mtu: 4200,
         real_rate: 100Gbit, hop_latency: 1us, nic_latency: 500ns}
qp: {mss: 4096}
"""
SMALL = """name: st
fabric: {host_link: {rate: 25Mbit, buffer: 100KB}, fabric_link: {rate: 25Mbit}, mtu: 4200}
qp: {mss: 4096}
"""
# the round trip across a spine of REAL, real seconds: serialization of a data packet and its
# ACK on 2 host links (25 Mbit/s) and 2 fabric links (50 Mbit/s), emulated, over D; and the
# latency both ways: 4 links of 1 us and 2 NICs of 500 ns
PACKET, ACK = (4096 + 40 + 62) * 8, (40 + 62) * 8
RTT = (2 * (PACKET + ACK) / 25e6 + 2 * (PACKET + ACK) / 50e6) / D + 2 * (4e-6 + 1e-6)
MRC_TIMEOUT = 1.024e-6 * 2**8  # the OCP MRC API's example
NCCL_TIMEOUT = 4.096e-6 * 2**20  # NCCL_IB_TIMEOUT 20, an RC QP's unit


def sc(text: str, extra: str = ""):
    return parse(text + extra, "t")


def test_the_real_frames_defaults_are_the_specifications_run_d_times_longer():
    s = sc(REAL)
    mrc, roce = timers(s, "mrc"), timers(s, "rocev2")
    assert mrc.timeout == pytest.approx(MRC_TIMEOUT * D)
    assert (mrc.linear_cnt, mrc.exp_cnt) == (7, 5)
    assert mrc.probe_timeout == pytest.approx(2e-3 * D), "the API's EV probe timeout"
    assert mrc.probe_interval == pytest.approx(2e-3 / 4 * D)
    assert mrc.congestion_holdoff == pytest.approx(RTT * D), "one base RTT"
    assert roce.timeout == pytest.approx(NCCL_TIMEOUT * D)
    assert (roce.linear_cnt, roce.exp_cnt) == (7, 0), "NCCL's retry_cnt: a fixed interval"
    assert mrc.max_retry_interval == pytest.approx(1.024e-6 * 2**24 * D)
    assert mrc.departures == () and roce.departures == (), "nothing compressed, the paper's DCQCN"


def test_stated_times_are_the_real_fabrics():
    s = sc(REAL.replace("qp: {mss: 4096}", "qp: {mss: 4096, timeout: 100us, retry: {retry_cnt: 3}}"
                        "\nmrc: {probe_interval: 1ms, probe_timeout: 3ms, "
                        "congestion_holdoff: 10us}"))
    mrc, roce = timers(s, "mrc"), timers(s, "rocev2")
    assert mrc.timeout == roce.timeout == pytest.approx(100e-6 * D)
    assert (roce.linear_cnt, roce.exp_cnt) == (3, 0)
    assert (mrc.probe_interval, mrc.probe_timeout, mrc.congestion_holdoff) == pytest.approx(
        (1e-3 * D, 3e-3 * D, 10e-6 * D))


def test_the_real_frames_times_name_their_unit():
    with pytest.raises(ScenarioError, match=r"qp\.timeout"):
        sc(REAL.replace("qp: {mss: 4096}", "qp: {mss: 4096, timeout: 0.01}"))
    with pytest.raises(ScenarioError, match=r"mrc\.probe_interval"):
        sc(REAL, "mrc: {probe_interval: 0.005}\n")


def test_timeout_exp_is_in_each_transports_unit():
    s = sc(SMALL.replace("qp: {mss: 4096}", "qp: {mss: 4096, timeout_exp: 10}"))
    assert timers(s, "mrc").timeout == pytest.approx(1.024e-6 * 1024)
    assert timers(s, "rocev2").timeout == pytest.approx(4.096e-6 * 1024)


def test_the_small_regime_keeps_its_timers():
    """Without real_rate: twice the longest drain (100 KB at 25 Mbit/s) plus 5 ms, the same
    schedule for both, probes every 5 ms timing out after 4, a 1 ms holdoff."""
    s = sc(SMALL)
    for transport in ("mrc", "rocev2"):
        t = timers(s, transport)
        assert t.timeout == pytest.approx(2 * 100_000 * 8 / 25e6 + 0.005)
        assert (t.linear_cnt, t.exp_cnt) == (7, 5)
        assert (t.probe_interval, t.probe_timeout, t.congestion_holdoff) == pytest.approx(
            (0.005, 0.020, 0.001))
    assert timers(s, "mrc").departures == ()
    assert [d.quantity for d in timers(s, "rocev2").departures] == [
        "dcqcn.g", "dcqcn.rate_ai", "dcqcn.rate_hai", "dcqcn.byte_counter"]


def test_timers_above_the_bound_are_compressed_and_each_is_a_departure():
    """At 10 base RTTs (about 110 us): MRC's 262 us timeout, its 500 us probe interval and
    2 ms probe timeout run at the bound; its holdoff (1 RTT) does not; NCCL's 4.29 s does."""
    s = sc(REAL.replace("qp: {mss: 4096}", "qp: {mss: 4096, compress_above_rtts: 10}"))
    bound = 10 * RTT
    mrc, roce = timers(s, "mrc"), timers(s, "rocev2")
    assert (mrc.timeout, mrc.probe_interval, mrc.probe_timeout) == pytest.approx(
        (bound * D,) * 3)
    assert mrc.congestion_holdoff == pytest.approx(RTT * D)
    assert roce.timeout == pytest.approx(bound * D)
    assert [d.quantity for d in mrc.departures] == [
        "mrc qp.timeout (default)", "mrc.probe_interval", "mrc.probe_timeout",
        "mrc retry schedule (time to give up)"]
    timeout, schedule = roce.departures
    assert (timeout.quantity, timeout.stated) == ("rocev2 qp.timeout (default)", "4.29 s")
    assert timeout.used == f"{bound * 1e6:.3g} us" and "compress_above_rtts = 10" in timeout.why
    assert schedule.stated == f"{8 * NCCL_TIMEOUT:.3g} s", "the first send and 7 retries"


def test_a_timer_no_run_could_wait_out_is_refused_with_the_arithmetic():
    """NCCL's schedule, 8 x 4.29 s = 34.4 s real, is 38.2 hours at D = 4,000: past the default
    30 minutes. Compressed at 100 base RTTs, it is 8 x 100 x RTT x D."""
    with pytest.raises(ScenarioError) as err:
        timers_.check(sc(REAL), "t")
    text = str(err.value)
    assert "rocev2: qp.timeout (default) 4.29 s of the real fabric" in text
    assert f"a QP waits {8 * NCCL_TIMEOUT:.3g} s on a dead path" in text
    assert f"x D 4,000 = {8 * NCCL_TIMEOUT * D / 3600:.3g} h emulated" in text
    assert "max_wall_time (30 min)" in text and "mrc:" not in text
    fits = int(1800 / (D * RTT * 8))
    assert "set qp.compress_above_rtts" in text and f"at most {fits:,} fits" in text
    ok = sc(REAL.replace("qp: {mss: 4096}", f"qp: {{mss: 4096, compress_above_rtts: {fits}}}"))
    timers_.check(ok, "t")
    assert timers(ok, "rocev2").time_to_fail() <= 1800


def test_compression_is_for_the_real_frame_only():
    with pytest.raises(ScenarioError, match="compress_above_rtts without fabric.real_rate"):
        sc(SMALL.replace("qp: {mss: 4096}", "qp: {mss: 4096, compress_above_rtts: 10}"))


def test_the_timers_and_gains_reach_the_agents(tmp_path: Path):
    """At 200 base RTTs (2.2 ms): MRC's timers as stated, NCCL's timeout compressed."""
    s = sc(REAL.replace("qp: {mss: 4096}", "qp: {mss: 4096, compress_above_rtts: 200}"))
    plan = make_plan(s)
    mrc = agent_configs(plan, s, "mrc", tmp_path)["h0"]
    assert mrc.qp.timeout == pytest.approx(MRC_TIMEOUT * D)
    assert mrc.mrc.probe_timeout == pytest.approx(2e-3 * D)
    roce = agent_configs(plan, s, "rocev2", tmp_path)["h0"]
    assert roce.qp.timeout == pytest.approx(200 * RTT * D)
    assert (roce.qp.linear_cnt, roce.qp.exp_cnt) == (7, 0)
    assert roce.dcqcn is not None
    assert (roce.dcqcn.g, roce.dcqcn.rate_ai, roce.dcqcn.byte_counter) == (1 / 256, 0.001,
                                                                          10_000_000)
    small = agent_configs(make_plan(sc(SMALL)), sc(SMALL), "rocev2", tmp_path)["h0"]
    assert small.dcqcn is not None and small.dcqcn.g == 1 / 16
