"""The similarity record: the ratios a dilated emulation must keep, and what it does not scale."""
from __future__ import annotations

import pytest

from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from testbed.run.similarity import similarity
from testbed.scenario import parse


def real(rate: str, extra: str = "") -> str:
    """A 100 Gbit/s fabric with 1 us hops, emulated at `rate` on every link."""
    return (f"name: s\nfabric: {{host_link: {{rate: {rate}}}, fabric_link: {{rate: {rate}}}, "
            f"real_rate: 100Gbit, hop_latency: 1us}}\n{extra}")


def test_without_latency_a_path_holds_its_store_and_forward_hops():
    """No latency: the round trip across a spine is four links' serialization of a data packet
    and its ACK, so the BDP is 4 x (mss + 2 headers) / (mss + 1 header) packets whatever the
    rate: the 4-5 packets of an emulated fabric that only scales the rate."""
    sc = parse("name: s\n", "t")
    s = similarity(sc)
    mss, head = sc.qp.mss, HEADER_SIZE + FRAME_OVERHEAD
    assert s.bdp_packets == pytest.approx(4 * (mss + 2 * head) / (mss + head))
    assert 4 < s.bdp_packets < 5
    assert (s.frame, s.dilation) == ("emulated", 1.0)
    # nothing is dilated: what departs is the constants chosen for the small regime
    assert s.departures and all(d.quantity.startswith("rocev2 dcqcn.") for d in s.departures)


def test_the_ratios_do_not_depend_on_the_dilation():
    """The same real fabric emulated at 25 and 12.5 Mbit/s (D 4,000 and 8,000): every ratio
    and every real-frame round trip is the same."""
    a, b = similarity(parse(real("25Mbit"), "t")), similarity(parse(real("12.5Mbit"), "t"))
    assert (a.dilation, b.dilation) == (4_000, 8_000)
    for name in ("bdp_packets", "buffer_bdp", "ecn_kmin_bdp", "trim_bdp", "message_bdp"):
        assert getattr(a, name) == pytest.approx(getattr(b, name)), name
    assert [p.rtt_s for p in a.paths] == pytest.approx([p.rtt_s for p in b.paths])


def test_a_real_round_trip_is_serialization_plus_the_hops_both_ways():
    """Across a spine at 100 Gbit/s with 1 us hops: 4 links x 2 ways x 1 us of latency plus the
    serialization of a data packet and its ACK on each link."""
    sc = parse(real("25Mbit"), "t")
    s = similarity(sc)
    head = HEADER_SIZE + FRAME_OVERHEAD
    serialization = 4 * (sc.qp.mss + 2 * head) * 8 / 100e9
    (across,) = [p for p in s.paths if p.path == "across a spine"]
    assert across.links == 4
    assert across.rtt_s == pytest.approx(8e-6 + serialization)
    assert s.bdp_packets == pytest.approx(across.rtt_s * 100e9 / ((sc.qp.mss + head) * 8))


def test_marking_and_trimming_off_have_no_ratio():
    s = similarity(parse("name: s\nswitch: {ecn: false, trim: false}\n", "t"))
    assert (s.ecn_kmin_bdp, s.trim_bdp) == (None, None)


def departures(text: str) -> dict[str, str]:
    return {d.quantity: d.used for d in similarity(parse(text, "t")).departures}


def test_real_frame_departures_name_what_is_not_dilated():
    quiet = departures(real("25Mbit", "qp: {compress_above_rtts: 50}\n"))
    # NCCL's 4.29 s RoCEv2 timeout compressed to 50 base RTTs; MRC's 262 us is under them
    assert "rocev2 qp.timeout (default)" in quiet and "mrc qp.timeout (default)" not in quiet
    assert "routing.convergence_delay" not in quiet  # no fault: routing never converges
    assert "background flows' link latency" not in quiet
    busy = departures(real("25Mbit", (
        "qp: {compress_above_rtts: 50}\n"
        "faults: [{at: 1ms, kind: link_down, target: {plane: 0, leaf: 0, spine: 0}, "
        "duration: 1ms}]\nbackground: [{pattern: elephant, src: h0, dst: h3, at: 0, "
        "duration: 0.3ms}]\n")))
    # 1 s of emulated convergence at D = 4,000
    assert busy["routing.convergence_delay"].startswith("250 us")
    assert busy["background flows' link latency"] == "none"
    # 0.3 ms real is 1.2 emulated seconds, which iperf3 runs as 1 s: 250 us real
    assert busy["background flows' durations"] == "250 us"
    by_netem = departures(real("25Mbit", "background: [{pattern: elephant, src: h0, dst: h3, "
                                         "at: 0, duration: 0.3ms}]\n").replace(
        "hop_latency: 1us", "hop_latency: 1us, latency_by: netem"))
    assert "background flows' link latency" not in by_netem  # the links delay them too
    whole = departures(real("25Mbit", "background: [{pattern: elephant, src: h0, dst: h3, "
                                      "at: 0, duration: 0.5ms}]\n"))
    assert "background flows' durations" not in whole  # 2 emulated seconds: kept


def test_the_window_cap_is_counted_in_the_bdp_of_the_ports_a_qp_spans():
    """An MRC QP sprays both planes: its cap covers twice the BDP a RoCEv2 QP's covers."""
    sc = parse(real("25Mbit", "qp: {max_cwnd: 256KB}\n"), "t")
    s = similarity(sc)
    bdp_bytes = s.bdp_packets * (sc.qp.mss + HEADER_SIZE + FRAME_OVERHEAD)
    assert s.window_bdp["rocev2"] == pytest.approx(256_000 / bdp_bytes)
    assert s.window_bdp["mrc"] == pytest.approx(s.window_bdp["rocev2"] / 2)


def test_routing_is_a_departure_only_where_a_link_goes_down():
    """A loss is never seen by routing: its convergence delay does not matter there."""
    lossy = departures(real("25Mbit", "qp: {compress_above_rtts: 50}\nfaults: [{at: 0us, "
                            "kind: loss, target: {plane: 0, leaf: 0, spine: 0}, "
                            "probability: 0.01}]\n"))
    assert "routing.convergence_delay" not in lossy


def test_a_departure_prints_the_first_clause_of_its_reason():
    from runcontract.similarity import Departure
    d = Departure(quantity="q", stated="1 s", used="250 us", why="short: and the long part")
    assert d.line() == "q: 250 us, real fabric 1 s (short)"


def test_runs_of_one_transport_carry_the_record_of_both():
    """A bench runs a scenario once per transport (`transport: [mrc]`, then `[rocev2]`): both
    runs carry one record, so a comparison prints it once."""
    text = real("25Mbit", "qp: {compress_above_rtts: 50}\n")
    assert (similarity(parse(text + "transport: [mrc]\n", "t"))
            == similarity(parse(text + "transport: [rocev2]\n", "t")))


def test_the_shapers_burst_is_a_departure_in_bytes_and_packets():
    """4 x the 4,200 B MTU at 25 Mbit/s, where 1 ms at line rate is only 3,125 B: 16,800 B,
    4.0 packets of 4,096 B of payload and 102 of headers and framing."""
    slow = departures(real("25Mbit", "qp: {mss: 4096, compress_above_rtts: 50}\n")
                      .replace("hop_latency: 1us", "hop_latency: 1us, mtu: 4200"))
    assert slow["link shaper burst"].startswith("16.4 KiB (4.0 packets) at once")
    assert "link shaper burst" not in {d.quantity for d in similarity(parse(
        "name: t\nworkload: {size: 1KiB}\n", "t")).departures}  # no real fabric: no departure
