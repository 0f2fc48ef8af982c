"""The `cluster:` section: defaults, and one clear error per kind of bad input."""
from __future__ import annotations

import pytest

from testbed import scenario
from testbed.errors import ScenarioError

TWO = ("cluster:\n  servers:\n"
       "    - {name: a, ssh: root@192.0.2.1, underlay: 10.0.0.1}\n"
       "    - {name: b, ssh: root@192.0.2.2, underlay: 10.0.0.2}\n")


def parse(text: str) -> scenario.Scenario:
    return scenario.parse("name: x\n" + text, "c.yaml")


def error_of(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        parse(text)
    assert info.value.exit_code == 2
    return str(info.value)


def test_absent_means_one_machine():
    assert parse("").cluster is None


def test_emulated_defaults():
    c = parse("cluster: {emulated: 2}").cluster
    assert c is not None
    assert c.server_names() == ["srv0", "srv1"]
    assert c.underlays() == {"srv0": "10.254.0.1", "srv1": "10.254.0.2"}
    assert (c.placement, c.vni_base, c.vxlan_port, c.ssh_transport) == ("pod", 10000, 4789,
                                                                         False)
    # fabric MTU 1500 + outer Ethernet, IPv4, UDP and VXLAN headers (14 + 20 + 8 + 8)
    assert c.required_mtu(1500) == 1550
    assert c.emulated_mtu(1500) == 1550
    assert parse("cluster: {emulated: 2, underlay_mtu: 9000}").cluster.emulated_mtu(1500) == 9000


def test_real_servers():
    c = parse(TWO).cluster
    assert c is not None and c.server_names() == ["a", "b"]
    assert c.underlays() == {"a": "10.0.0.1", "b": "10.0.0.2"}


@pytest.mark.parametrize(("text", "expected"), [
    ("cluster: {}", "give either servers (real, over ssh) or emulated: N"),
    ("cluster: {emulated: 1}", "cluster.emulated: 1 is not allowed: Input should be greater"),
    ("cluster: {emulated: 9}", "cluster.emulated: 9 is not allowed: Input should be less"),
    ("cluster: {emulated: 2, placment: pod}", "did you mean 'placement'?"),
    ("cluster: {emulated: 2, placement: random}", "cluster.placement: 'random' is not allowed"),
    (TWO.replace("root@192.0.2.2", "'root@x; rm -rf /'"), "cluster.servers.1.ssh"),
    (TWO.replace("name: b", "name: B"), "cluster.servers.1.name: 'B' is not allowed"),
    (TWO.replace("name: b", "name: a"), "servers: name a given twice"),
    (TWO.replace("10.0.0.2", "10.0.0.1"), "servers: underlay 10.0.0.1 given twice"),
    (TWO.replace("10.0.0.2", "'fd00::2'"), "mix IPv4 and IPv6"),
    (TWO.replace("10.0.0.2", "127.0.0.1"), "cannot carry tunnels between servers"),
    (TWO.replace("10.0.0.2", "server-b"), "'server-b' is not an IPv4 or IPv6 address"),
    (TWO + "  underlay_mtu: 9000\n", "underlay_mtu is for emulated servers"),
    (TWO + "  emulated: 2\n", "not both"),
    ("cluster: {emulated: 3}", "2 leaves per plane cannot fill 3 servers; use at most 2"),
    ("cluster: {emulated: 2, vni_base: 16777210}", "exceeds the largest VNI 16777215"),
])
def test_bad_sections_are_refused(text, expected):
    assert expected in error_of(text)


def test_round_robin_needs_no_pod_per_server():
    assert parse("cluster: {emulated: 3, placement: round_robin}").cluster is not None


def test_describe_names_the_servers():
    assert scenario.describe(parse("cluster: {emulated: 2}")).endswith(
        "on 2 emulated servers (pod placement)")
