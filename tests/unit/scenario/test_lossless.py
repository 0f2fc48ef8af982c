"""switch.lossless: what it turns on and off, the queue limit it gives router ports, the
fields that contradict it, and the label every run of a scenario carries."""
from __future__ import annotations

import pytest

from testbed import scenario
from testbed.errors import ScenarioError
from testbed.fabric.plan import make_plan
from testbed.kernel.fabric_queue import LOSSLESS, port_config, router_ports
from testbed.scenario.red import RedProfile


def parse(text: str) -> scenario.Scenario:
    return scenario.parse(text, "t", "t")


def test_lossless_is_off_by_default_and_turns_trimming_off_but_not_ecn():
    lossy = parse("")
    assert not lossy.switch.lossless and lossy.switch.trimming
    s = parse("switch: {lossless: true}")
    assert s.switch.lossless and s.switch.ecn and not s.switch.trimming
    links = make_plan(s).links
    assert all(link.trim == 0 and link.ecn == RedProfile(5_000, 200_000, 0.01)
               for link in links), "ECN with the DCQCN paper's profile, no trim threshold"


def test_lossless_alone_still_runs_the_program():
    """With ECN and trimming off the program still runs in lossless mode: it is what queues past
    the buffer and counts an overflow."""
    assert not parse("switch: {ecn: false, trim: false}").switch.enabled
    assert parse("switch: {ecn: false, lossless: true}").switch.enabled


def test_router_ports_queue_an_equal_share_of_the_budget():
    """The default fabric: 2 planes, each with 4 host links (one router end) and 2 leaves x 2
    spines (two router ends): 2 x (4 + 8) = 24 router ports share 1 GiB."""
    s = parse("switch: {lossless: true}")
    assert s.router_ports() == 24
    plan = make_plan(s)
    assert len(router_ports(plan)) == 24
    share = 2**30 // 24
    assert {link.limit for link in plan.links} == {share}
    assert all(link.lossless and link.buffer == 100_000 for link in plan.links)
    config = port_config(plan.links[0])
    assert config.buffer == share and config.flags == LOSSLESS and config.trim == 0
    lossy = make_plan(parse("")).links[0]
    assert lossy.limit == lossy.buffer == port_config(lossy).buffer
    assert not lossy.lossless and port_config(lossy).flags == 0


def test_a_buffer_above_the_share_is_the_limit():
    """A lossless port never holds less than a lossy one would."""
    s = parse("switch: {lossless: true}\n"
              "fabric: {fabric_link: {rate: 100Gbit, buffer: 200MiB}}")
    assert s.queue_limit(s.fabric.fabric_link) == 200 * 2**20
    assert s.queue_limit(s.fabric.host_link) == 2**30 // 24


@pytest.mark.parametrize("text, says", [
    ("switch: {lossless: true, trim: true}", "lossless: true with trim: true"),
    ("switch: {lossless: true}\nfabric: {host_link: {trim_threshold: 50KB}}",
     "fabric.host_link.trim_threshold with switch.lossless"),
    ("switch: {lossless: true}\nfabric: {fabric_link: {trim_threshold: 50KB}}",
     "fabric.fabric_link.trim_threshold with switch.lossless"),
    ("switch: {lossless: 1}", "switch.lossless"),
    ("switch: {lossles: true}", "did you mean 'lossless'"),
])
def test_fields_that_contradict_lossless_are_errors(text: str, says: str):
    with pytest.raises(ScenarioError) as info:
        parse(text)
    assert says in str(info.value)


def test_what_lossless_allows():
    """trim: false says what lossless implies; an ECN threshold still applies; lossy trims
    with an explicit threshold as before; faults that drop are kept."""
    assert not parse("switch: {lossless: true, trim: false}").switch.trimming
    s = parse("switch: {lossless: true}\nfabric: {fabric_link: {ecn_threshold: 30KB}}")
    assert s.fabric.fabric_link.ecn() == RedProfile(30_000, 30_000, 1.0)
    assert parse("fabric: {host_link: {trim_threshold: 50KB}}").fabric.host_link.trim() == 50_000
    s = parse("switch: {lossless: true}\nfaults: [{kind: loss, at: 1, duration: 1, "
              "target: {plane: 0, leaf: 0, spine: 1}, probability: 0.01}]")
    assert s.faults[0].kind == "loss"


@pytest.mark.parametrize("text, transport, label", [
    ("", "rocev2", "RoCEv2, lossy, Go-Back-N, DCQCN"),
    ("switch: {lossless: true}", "rocev2", "RoCEv2, lossless, Go-Back-N, DCQCN"),
    ("", "mrc", "MRC, lossy, SACK, NSCC, trimming"),
    ("switch: {lossless: true}", "mrc", "MRC, lossless, SACK, NSCC"),
    ("switch: {trim: false}", "mrc", "MRC, lossy, SACK, NSCC"),
    ("switch: {trim: false}", "rocev2", "RoCEv2, lossy, Go-Back-N, DCQCN"),
    ("switch: {ecn: false}", "rocev2", "RoCEv2, lossy, Go-Back-N, DCQCN, no ECN"),
    ("switch: {ecn: false, lossless: true}", "mrc", "MRC, lossless, SACK, NSCC, no ECN"),
])
def test_the_variant_names_what_ran(text: str, transport: str, label: str):
    assert parse(text).variant(transport) == label
