"""Straggler faults and compute jitter: on the scenario's fault timeline, checked before
anything runs, handed to the agent of the straggling rank only."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import ScenarioError
from testbed.fabric.plan import make_plan
from testbed.fabric.timeline import check
from testbed.run.traffic import agent_configs
from testbed.scenario import schema

ROOT = Path(__file__).resolve().parents[3]
TEXT = (ROOT / "scenarios" / "training-quickstart.yaml").read_text()


def scenario(faults: str, text: str = TEXT, jitter: float | None = None) -> schema.Scenario:
    if jitter is not None:
        text = text.replace("workload:\n", f"workload:\n  compute_jitter: {jitter}\n")
    sc = schema.parse(f"{text}\nfaults: {faults}\n", "s.yaml")
    check(sc, "s.yaml")
    return sc


def test_the_straggling_rank_alone_gets_its_windows(tmp_path):
    sc = scenario("[{at: 1, kind: straggler, target: {host: h3}, factor: 2, duration: 2},"
                  " {at: 4, kind: straggler, target: {host: h3}, factor: 1.5},"
                  " {at: 0.5, kind: link_down, target: {plane: 0, leaf: 0, spine: 1},"
                  "  duration: 1}]", jitter=0.1)
    configs = agent_configs(make_plan(sc), sc, "mrc", tmp_path)
    assert configs["h3"].workload.stragglers == [(1.0, 3.0, 2.0), (4.0, None, 1.5)]
    assert all(configs[h].workload.stragglers == [] for h in configs if h != "h3")
    assert {c.workload.compute_jitter for c in configs.values()} == {0.1}


@pytest.mark.parametrize(("faults", "message"), [
    ("[{at: 1, kind: straggler, target: {host: h3}}]", "straggler needs factor"),
    ("[{at: 1, kind: straggler, target: {host: h3}, factor: 0.5}]", "greater than 1"),
    ("[{at: 1, kind: straggler, target: {host: h3, plane: 0}, factor: 2}]",
     "straggler applies to a host target, not a host_port"),
    ("[{at: 1, kind: link_down, target: {host: h3}}]", "applies to a link or host_port"),
    ("[{at: 1, kind: straggler, target: {host: h9}, factor: 2}]",
     "faults.0: straggler on 'h9', which runs no rank"),
    ("[{at: 1, kind: straggler, target: {host: h2}, factor: 2, duration: 2},"
     " {at: 2.5, kind: straggler, target: {host: h2}, factor: 3}]",
     "faults.1: straggler on h2 overlaps faults.0"),
])
def test_bad_stragglers_are_refused(faults, message):
    with pytest.raises(ScenarioError, match=message):
        scenario(faults)


def test_a_straggler_needs_a_step_workload():
    looped = (ROOT / "scenarios" / "quickstart.yaml").read_text()
    with pytest.raises(ScenarioError, match="a straggler slows a training step's compute"):
        scenario("[{at: 1, kind: straggler, target: {host: h1}, factor: 2}]", text=looped)
