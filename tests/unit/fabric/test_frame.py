"""The frame: real-fabric times become emulated ones (times D); without real_rate, none moves."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.fabric.frame import Frame, dilation
from testbed.fabric.plan import make_plan
from testbed.run.results import facts
from testbed.run.traffic import agent_configs
from testbed.scenario import parse

ROOT = Path(__file__).resolve().parents[3]
LINK = "{plane: 0, leaf: 0, spine: 0}"
# 100 Gbit/s real over 25 Mbit/s emulated: D = 100e9 / 25e6 = 4,000
REAL = "fabric: {host_link: {rate: 25Mbit}, real_rate: 100Gbit, hop_latency: 1us}\n"
FAULTS = ("faults:\n"
          f"  - {{at: 1ms, kind: link_down, target: {LINK}, duration: 2ms}}\n"
          "  - {at: 0.5ms, kind: flap, target: {host: h1, plane: 1}, period: 0.25ms, until: 3ms}\n"
          f"  - {{at: 0, kind: delay, target: {LINK}, delay: 1us, duration: 5us}}\n")
BACKGROUND = ("background:\n"
              "  - {pattern: elephant, src: h0, dst: h3, at: 1ms, duration: 0.6ms}\n"
              "  - {pattern: elephant, src: h1, dst: h2, at: 0, duration: 100ns}\n")


def test_dilation_is_the_real_rate_over_the_host_links():
    sc = parse("name: x\nfabric: {host_link: {rate: 10Mbit}, real_rate: 400Gbit}\n", "t")
    assert dilation(sc) == 40_000 and Frame.of(sc) == Frame(40_000, True)
    assert dilation(parse("name: x\n", "t")) is None
    assert Frame.of(parse("name: x\n", "t")) == Frame(1.0, False)


def test_real_frame_times_run_d_times_longer():
    sc = parse("name: x\n" + REAL + "workload: {compute_gap: 5ms}\n" + FAULTS, "t")
    frame = Frame.of(sc)
    assert frame.dilation == 4000
    assert frame.emulated(1e-6) == pytest.approx(0.004) and frame.in_real(4.0) == 1e-3
    assert frame.hop_latency(sc) == pytest.approx(0.004)
    assert frame.compute_gap(sc) == pytest.approx(20.0)
    down, flap, delay = frame.faults(sc.faults)
    assert (down.at, down.duration) == pytest.approx((4.0, 8.0))
    assert (flap.at, flap.period, flap.until) == pytest.approx((2.0, 1.0, 12.0))
    assert flap.flap_cycles() == sc.faults[1].flap_cycles() == 10  # (3 - 0.5) / 0.25
    assert (delay.at, delay.delay, delay.duration) == pytest.approx((0.0, 0.004, 0.02))
    assert (down.kind, down.target) == (sc.faults[0].kind, sc.faults[0].target)


def test_background_durations_round_to_whole_emulated_seconds():
    sc = parse("name: x\n" + REAL + BACKGROUND, "t")
    long, short = Frame.of(sc).background(sc.background)
    assert long.at == pytest.approx(4.0) and long.duration == 2.0  # 2.4 s rounds to 2
    assert short.duration == 1.0  # 0.4 ms emulated: iperf3 runs at least a second


def test_without_real_rate_every_time_keeps_its_meaning():
    sc = parse("name: x\nfabric: {hop_latency: 2ms}\nworkload: {compute_gap: 0.5}\n"
               + FAULTS.replace("ms", "").replace("us", "") + BACKGROUND.replace(
                   "0.6ms", "3").replace("100ns", "1"), "t")
    frame = Frame.of(sc)
    assert frame.faults(sc.faults) == sc.faults
    assert frame.background(sc.background) == sc.background
    assert (frame.hop_latency(sc), frame.compute_gap(sc)) == (0.002, 0.5)


def test_the_agents_get_emulated_gaps_and_windows(tmp_path):
    text = (ROOT / "scenarios" / "training-straggler.yaml").read_text()
    sc = parse(text.replace("  mtu: 4200\n", "  mtu: 4200\n  real_rate: 100Gbit\n")
               .replace("forward: 0.005", "forward: 5ms").replace("backward: 0.010",
                                                                   "backward: 10ms")
               .replace("at: 0.4,", "at: 0.1ms,").replace("duration: 0.3}", "duration: 75us}"),
               "t")
    raw = [f for f in sc.faults if f.kind == "straggler"][0]
    host = raw.target.host
    assert host is not None and raw.duration is not None
    config = agent_configs(make_plan(sc), sc, "mrc", tmp_path)[host].workload
    assert config.compute_scale == 4000
    assert config.stragglers == [pytest.approx((4000 * raw.at, 4000 * (raw.at + raw.duration),
                                                raw.factor))]
    gap = parse("name: x\n" + REAL + "workload: {compute_gap: 5ms}\n", "t")
    assert agent_configs(make_plan(gap), gap, "mrc", tmp_path)["h0"].workload.compute_gap == (
        pytest.approx(20.0))


def test_the_results_place_background_flows_in_emulated_time():
    sc = parse("name: x\n" + REAL + BACKGROUND, "t")
    windows = facts(sc, "mrc").background
    assert [w.start for w in windows] == pytest.approx([4.0, 0.0])
    assert [w.end for w in windows] == pytest.approx([6.0, 1.0])
