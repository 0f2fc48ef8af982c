"""The ECN/trimming program's Python side, without root: settings and the missing-object error."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed import scenario
from testbed.errors import EnvironmentProblem
from testbed.fabric.plan import make_plan
from testbed.kernel.fabric_queue import FabricQueues, port_config, router_ports


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
    assert (host.rate, host.ecn, host.trim, host.buffer) == (4_900_000, 0, 40_000, 50_000)
    assert (fabric.rate, fabric.trim, fabric.buffer) == (9_800_000, 60_000, 100_000)
    degraded = port_config(next(link for p, link in ports if link.kind == "fabric"), 8_000_000)
    assert degraded.rate == 980_000 and degraded.trim == 60_000
