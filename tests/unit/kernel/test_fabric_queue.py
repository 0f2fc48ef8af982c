"""The ECN/trimming program's Python side, without root: settings and the missing-object error."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed import scenario
from testbed.errors import EnvironmentProblem
from testbed.fabric.plan import make_plan
from testbed.kernel.fabric_queue import FabricQueues, mark_ppm, port_config, router_ports


def test_missing_object_names_the_fix():
    with pytest.raises(EnvironmentProblem) as info:
        FabricQueues(Path("/nonexistent/fabric_queue.o"))
    assert info.value.exit_code == 3
    assert "make bpf" in str(info.value) and "switch: {ecn: false, trim: false}" in str(info.value)


def test_router_ports_and_their_settings():
    s = scenario.parse("fabric: {host_link: {rate: 40Mbit, buffer: 50KB}, "
                       "fabric_link: {rate: 80Mbit, buffer: 100KB, trim_threshold: 60KB}}\n"
                       "switch: {ecn: false}", "t", "t")
    plan = make_plan(s)
    ports = router_ports(plan)
    assert {plan.nodes[p.node].role for p, _ in ports} == {"leaf", "spine"}
    # every link has exactly one router end (host links) or two (fabric links)
    assert len(ports) == sum(1 if link.kind == "host" else 2 for link in plan.links)
    host = port_config(next(link for p, link in ports if link.kind == "host"))
    fabric = port_config(next(link for p, link in ports if link.kind == "fabric"))
    # the line rate in bytes/s: the queue drains as fast as the link into it can fill it
    assert (host.rate, host.kmax, host.trim, host.buffer) == (5_000_000, 0, 40_000, 50_000)
    assert (fabric.rate, fabric.trim, fabric.buffer) == (10_000_000, 60_000, 100_000)
    degraded = port_config(next(link for p, link in ports if link.kind == "fabric"), 8_000_000)
    assert degraded.rate == 1_000_000 and degraded.trim == 60_000


def test_ecn_settings_default_to_the_dcqcn_papers_profile_or_a_step():
    s = scenario.parse("fabric: {host_link: {ecn_threshold: 9KB}, "
                       "fabric_link: {ecn_kmin: 10KB, ecn_pmax: 0.2}}", "t", "t")
    links = make_plan(s).links
    host = port_config(next(link for link in links if link.kind == "host"))
    fabric = port_config(next(link for link in links if link.kind == "fabric"))
    assert (host.kmin, host.kmax, host.pmax) == (9_000, 9_000, 1_000_000)
    assert (fabric.kmin, fabric.kmax, fabric.pmax) == (10_000, 200_000, 200_000)
    plain = port_config(make_plan(scenario.parse("name: t", "t", "t")).links[0])
    assert (plain.kmin, plain.kmax, plain.pmax) == (5_000, 200_000, 10_000)


@pytest.mark.parametrize("ahead, expected", [
    (0, 0), (5_000, 0),  # at or below K_min: never
    (5_001, 0),  # a byte above: 0.01 * 1/195000 of a millionth, rounded down
    (102_500, 5_000),  # half way from 5 KB to 200 KB: half of P_max (1%)
    (200_000, 10_000),  # at K_max: P_max
    (200_001, 1_000_000),  # above K_max: always
])
def test_red_probability_rises_linearly_from_kmin_to_kmax(ahead: int, expected: int):
    assert mark_ppm(ahead, 5_000, 200_000, 10_000) == expected


def test_a_step_marks_above_its_threshold_and_kmax_zero_never():
    assert [mark_ppm(q, 3_000, 3_000, 1_000_000) for q in (2_999, 3_000, 3_001)] == [
        0, 0, 1_000_000]
    assert mark_ppm(10**8, 0, 0, 1_000_000) == 0
