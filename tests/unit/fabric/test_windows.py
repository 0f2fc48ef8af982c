"""A QP's window: fixed defaults without a real fabric, NSCC's 1.5 x BDP with one, and a set
start checked against the cap it will meet."""
from __future__ import annotations

import pytest

from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from testbed.errors import ScenarioError
from testbed.fabric.latency import ACROSS_A_SPINE, bdp_packets
from testbed.fabric.windows import check, windows
from testbed.scenario import parse

REAL = ("name: w\nfabric: {planes: 2, host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}, "
        "mtu: 4200, real_rate: 100Gbit, hop_latency: 1us}\nqp: {mss: 4096%s}\n")


def test_without_a_real_fabric_the_defaults_are_fixed():
    assert windows(parse("name: w\n", "t"), "mrc") == (64 * 1024, 256 * 1024)
    assert windows(parse("name: w\n", "t"), "rocev2") == (64 * 1024, 256 * 1024)


def test_in_the_real_frame_the_cap_is_one_and_a_half_bdps_of_the_ports_a_qp_uses():
    """An MRC QP sprays both planes, a RoCEv2 QP keeps to one: MRC's cap is twice RoCEv2's,
    and NSCC starts at its cap."""
    sc = parse(REAL % "", "t")
    bdp = bdp_packets(sc, ACROSS_A_SPINE) * (4096 + HEADER_SIZE + FRAME_OVERHEAD)
    assert windows(sc, "rocev2") == (int(1.5 * bdp), int(1.5 * bdp))
    assert windows(sc, "mrc") == (int(1.5 * 2 * bdp), int(1.5 * 2 * bdp))


def test_a_set_window_is_kept_and_a_start_above_the_derived_cap_refused():
    assert windows(parse(REAL % ", max_cwnd: 1MiB, init_cwnd: 64KiB", "t"), "mrc") == (
        64 * 1024, 1024 * 1024)
    sc = parse(REAL % ", init_cwnd: 8MiB", "t")  # above RoCEv2's derived cap (about 210 KB)
    with pytest.raises(ScenarioError) as info:
        check(sc, "w.yaml")
    assert "rocev2: init_cwnd 8 MiB exceeds max_cwnd" in str(info.value)
    assert "set qp.init_cwnd between one mss and qp.max_cwnd" in str(info.value.hint)
    check(parse(REAL % "", "t"), "w.yaml")  # the defaults pass
