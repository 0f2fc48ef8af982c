"""Background flows from their patterns (pure)."""
from __future__ import annotations

import pytest

from testbed.errors import ScenarioError
from testbed.scenario import parse
from testbed.scenario.background import Background, flows

HOSTS = ["h0", "h1", "h2", "h3"]


def test_incast_defaults_to_every_other_host():
    got = flows(HOSTS, [Background(pattern="incast", duration=1, receiver="h2")], seed=1)
    assert [(f.src, f.dst, f.port) for f in got] == [
        ("h0", "h2", 5301), ("h1", "h2", 5302), ("h3", "h2", 5303)]


def test_kind_reaches_every_flow_of_its_pattern():
    got = flows(HOSTS, [Background(pattern="incast", duration=1, receiver="h0"),
                        Background(pattern="elephant", duration=1, src="h1", dst="h2",
                                   kind="udp", rate=1_000_000)], seed=1)
    assert [f.kind for f in got] == ["tcp", "tcp", "tcp", "udp"]


def test_permutation_is_a_seeded_derangement():
    one = flows(HOSTS, [Background(pattern="permutation", duration=1)], seed=7)
    assert sorted(f.src for f in one) == HOSTS and sorted(f.dst for f in one) == HOSTS
    assert all(f.src != f.dst for f in one)
    assert one == flows(HOSTS, [Background(pattern="permutation", duration=1)], seed=7)


@pytest.mark.parametrize("text, message", [
    ("[{pattern: incast, duration: 1, kind: udp, receiver: h0}]",
     "a UDP background flow needs a rate"),
    ("[{pattern: elephant, duration: 1, src: h0}]", "elephant needs dst"),
    # the field's old name is answered with the rename, not a bare "extra input"
    ("[{pattern: incast, duration: 1, protocol: udp, receiver: h0}]",
     "`protocol` is now `kind`: write `kind: udp`"),
    ("[{pattern: permutation, duration: 1, receiver: h0}]", "permutation does not take receiver"),
    ("[{pattern: incast, duration: 1, receiver: h9}]", "['h9'] are not hosts of this fabric"),
    ("[{pattern: elephant, duration: 1, src: h1, dst: h1}]", "needs two different hosts"),
    ("[{pattern: incast, duration: 1, receiver: h0, plane: 5}]", "no plane 5"),
    # iperf3 -t reads whole seconds: 1.5 would run 1 s, 0.8 until the workload ends
    ("[{pattern: incast, duration: 1.5, receiver: h0}]",
     "iperf3 counts whole seconds (it would run 1 s)"),
    ("[{pattern: incast, duration: 0.8, receiver: h0}]",
     "(it would run 0 s, that is until stopped)"),
])
def test_bad_background_is_rejected(text: str, message: str):
    with pytest.raises(ScenarioError) as info:
        parse(f"name: b\nbackground: {text}\n", "b.yaml")
    assert message in str(info.value)
