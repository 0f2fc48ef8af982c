"""bench/delay_line.py's arithmetic and its runs without latency, worked out by hand."""
from __future__ import annotations

import subprocess
import sys

import pytest

from bench import fair
from bench.common import ROOT
from bench.delay_line import NO_LATENCY, SCENARIO, Pair
from testbed.scenario.schema import parse


def test_the_run_without_latency_holds_nothing_and_keeps_the_rest():
    name, text = fair.variant_text(SCENARIO.read_text(), "mrc", 2, NO_LATENCY)
    plain, held = parse(text, "t"), parse(fair.variant_text(SCENARIO.read_text(), "mrc", 2)[1],
                                          "t")
    assert held.fabric.hop_latency > 0
    assert plain.fabric.hop_latency == 0 and plain.fabric.nic_latency == 0
    assert plain.fabric.host_link == held.fabric.host_link  # the same rate and buffers
    assert plain.seed == held.seed == 2 and plain.workload == held.workload


def test_cpu_per_packet_with_over_without():
    # 3 s for 100,000 packets = 30 us; 2 s for 80,000 = 25 us; 30 / 25 = 1.2
    p = Pair("mrc", 1, 3.0, 100_000, 2.0, 80_000, True)
    assert p.held_us == pytest.approx(30.0) and p.plain_us == pytest.approx(25.0)
    assert p.ratio == pytest.approx(1.2)
    assert Pair("mrc", 1, 3.0, 100_000, 2.0, 0, False).ratio is None


def test_a_scenario_without_latency_is_refused(tmp_path):
    flat = tmp_path / "flat.yaml"
    flat.write_text(SCENARIO.read_text().replace("hop_latency: 1us", "hop_latency: 0us"))
    done = subprocess.run([sys.executable, "-m", "bench.delay_line", str(flat)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "no link latency" in done.stderr
