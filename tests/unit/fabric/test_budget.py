"""`rate: auto`'s arithmetic (testbed/fabric/budget.py) and the scenario's `auto` rates, with
values computed by hand in the comments."""
from __future__ import annotations

import pytest

from testbed import scenario
from testbed.errors import ScenarioError
from testbed.fabric import budget
from testbed.fabric.plan import make_plan
from testbed.run import verdict as fidelity

FOUR = """name: four
fabric: {planes: 2, leaves_per_plane: 2, spines_per_plane: 2, hosts_per_leaf: 2,
         host_link: {rate: %s}, fabric_link: {rate: %s}, mtu: 4200}
qp: {mss: 4096}
transport: %s
workload: {collective: %s}
"""


def four(rate="auto", transport="[mrc]", collective="all_reduce", fabric_rate=None):
    return scenario.parse(FOUR % (rate, fabric_rate or rate, transport, collective), "t")


COST = budget.PacketCost(agent_s=50e-6, kernel_s_per_link=5e-6, cores=2)


def test_packet_and_hops():
    sc = four()
    assert budget.packet_bits(sc) == 8 * (4096 + 40 + 62)  # 33,584: payload, header, UDP/IP/Eth
    # ring h0 h1 | h2 h3: h0-h1 same leaf (2 links), h1-h2 through a spine (4), h2-h3 (2), h3-h0 (4)
    assert budget.links_per_packet(sc) == 3.0
    # all_to_all: of 12 ordered pairs, 4 within a leaf (2 links), 8 through a spine (4): 40/12
    assert budget.links_per_packet(four(collective="all_to_all")) == pytest.approx(40 / 12)


def test_ring_of_64_crosses_a_spine_at_every_eighth_neighbour():
    sc = scenario.parse("name: r\nfabric: {planes: 4, leaves_per_plane: 8, spines_per_plane: 4,"
                        " hosts_per_leaf: 8}\n", "t")
    assert budget.links_per_packet(sc) == (56 * 2 + 8 * 4) / 64  # 2.25


def test_choose_rate_by_hand():
    c = budget.choose_rate(four(), COST)
    # cost 50 + 3 x 5 = 65 us; budget 0.8 x 2 = 1.6 CPU-s/s;
    # R = 1.6 x 33,584 / (4 ranks x 2 planes x 65e-6) = 103,335,385 bit/s -> rung 100 Mbit/s
    assert c.cost_per_packet_s == pytest.approx(65e-6)
    assert c.max_rate == pytest.approx(103_335_384.6, rel=1e-9)
    assert c.rate == 100_000_000 and c.fits
    # at 100 Mbit/s: 8 x 1e8 / 33,584 = 23,820.9 packets/s, x 65 us / 2 cores = 77.4%
    assert c.packets_per_s == pytest.approx(23_820.9, abs=0.1)
    assert c.cpu_share == pytest.approx(0.7742, abs=1e-4)
    assert any("100 Mbit/s" in line for line in c.lines())


def test_one_plane_baseline_gets_twice_the_rate_budget():
    sc = scenario.parse("""name: one
fabric: {planes: 2, leaves_per_plane: 2, spines_per_plane: 2, hosts_per_leaf: 2,
         host_link: {rate: auto}, fabric_link: {rate: auto}, mtu: 4200}
qp: {mss: 4096, qps_per_peer: {rocev2: 1}}
transport: [rocev2]
""", "t")
    c = budget.choose_rate(sc, COST)
    assert c.planes == 1
    assert c.max_rate == pytest.approx(2 * 103_335_384.6, rel=1e-9)  # 206.7 Mbit/s -> 200
    assert c.rate == 200_000_000


def test_nothing_fits_takes_the_lowest_rung_and_says_so():
    slow = budget.PacketCost(agent_s=1.0, kernel_s_per_link=0.0, cores=1)
    c = budget.choose_rate(four(), slow)
    assert c.rate == min(budget.AUTO_RATE_LADDER) and not c.fits
    assert "OVER the budget" in c.lines()[0]


def test_share_is_the_verdicts_bound():
    assert budget.CPU_SHARE == fidelity.RUN_CPU_DEGRADED


def test_auto_is_chosen_before_anything_is_planned():
    sc = four()
    assert sc.auto_links() == ("fabric_link", "host_link")
    assert "host links auto" in scenario.describe(sc)
    with pytest.raises(ScenarioError, match="rate is auto"):
        make_plan(sc)
    at = sc.with_rate(10_000_000)
    assert at.fabric.host_link.rate == at.fabric.fabric_link.rate == 10_000_000
    assert at.auto_links() == ()
    assert at.timeout() == pytest.approx(2 * 100_000 * 8 / 10e6 + 0.005)  # derived at 10 Mbit/s
    make_plan(at)


def test_only_the_auto_class_is_chosen():
    sc = four(rate="auto", fabric_rate="25Mbit")
    assert sc.auto_links() == ("host_link",)
    at = sc.with_rate(5_000_000)
    assert (at.fabric.host_link.rate, at.fabric.fabric_link.rate) == (5_000_000, 25_000_000)


def test_a_rate_that_breaks_a_derived_bound_is_an_error_naming_auto():
    sc = scenario.parse("name: b\nfabric: {host_link: {rate: auto, buffer: 1MB}}\n", "t")
    with pytest.raises(ScenarioError, match=r"(?s)rate: auto = 200 kbit/s.*qp\.timeout"):
        sc.with_rate(200_000)  # 1 MB at 200 kbit/s drains in 40 s: the timeout's bound fails


def test_absolute_degrade_on_an_auto_link_is_refused():
    text = ("name: d\nfabric: {fabric_link: {rate: auto}}\nfaults:\n"
            "  - {at: 1, kind: degrade, target: {plane: 0, leaf: 0, spine: 0}, rate: 5Mbit}\n")
    with pytest.raises(ScenarioError, match="fraction"):
        scenario.parse(text, "t")


M = 1_000_000
LADDER = (200_000, 500_000, M, 2 * M, 5 * M, 10 * M)


def step(measured: dict[int, float]) -> budget.PilotStep:
    return budget.pilot_step(measured, share=0.75, ladder=LADDER)


def test_pilot_goes_down_until_a_rung_fits_and_chooses_it():
    assert step({M: 0.84}) == budget.PilotStep(500_000, None, True)
    # 40% at 500 kbit/s: 1 Mbit/s measured over already, so no step up
    assert step({M: 0.84, 500_000: 0.40}) == budget.PilotStep(None, 500_000, True)


def test_pilot_measures_the_next_rung_up_only_where_it_may_fit():
    # 40% at 1 Mbit/s: 2 Mbit/s in proportion is 80%, within the machine: measured
    assert step({M: 0.40}) == budget.PilotStep(2 * M, None, True)
    # then 74%: within 75%, and 5 Mbit/s in proportion is 185%: 2 Mbit/s chosen
    assert step({M: 0.40, 2 * M: 0.74}) == budget.PilotStep(None, 2 * M, True)
    # 2 Mbit/s over: back to the highest rung within
    assert step({M: 0.40, 2 * M: 0.78}) == budget.PilotStep(None, M, True)
    # 60% at 1 Mbit/s: 120% at 2 Mbit/s in proportion, not worth measuring
    assert step({M: 0.60}) == budget.PilotStep(None, M, True)


def test_pilot_at_the_ends_of_the_ladder():
    assert step({200_000: 0.9}) == budget.PilotStep(None, 200_000, False)
    assert step({10 * M: 0.2}) == budget.PilotStep(None, 10 * M, True)
    assert step({M: 0.75}) == budget.PilotStep(None, M, True)  # at the share: within
