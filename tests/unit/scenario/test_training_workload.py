"""workload.training: validated against the ranks, turned into each agent's step plan."""
from __future__ import annotations

from pathlib import Path

import pytest

from hostagent.workloads.graph import RankPlan
from testbed.fabric.frame import Frame
from testbed.fabric.plan import make_plan
from testbed.run.traffic import agent_configs
from testbed.scenario import schema

ROOT = Path(__file__).resolve().parents[3]


def load(**training):
    base = {"dp": 2, "tp": 2, "pp": 2, "layers": 4}
    scenario, _ = schema.load(ROOT / "scenarios" / "training-quickstart.yaml")
    data = scenario.model_dump(mode="json")
    data["workload"]["training"] = {**data["workload"]["training"], **base, **training}
    return schema.Scenario.model_validate(data, strict=False)


def test_shipped_scenario_gives_each_agent_its_plan(tmp_path):
    scenario, _ = schema.load(ROOT / "scenarios" / "training-quickstart.yaml")
    configs = agent_configs(make_plan(scenario), scenario, "mrc", tmp_path)
    assert len(configs) == 8
    plan = RankPlan.from_dict(configs["h5"].workload.steps)
    assert plan.graph.rank == configs["h5"].rank == 5
    assert plan.groups["tp0.1"] == (4, 5)
    assert configs["h5"].workload.compute_scale == Frame.of(scenario).dilation == 1.0


def test_degrees_must_match_the_ranks():
    with pytest.raises(Exception, match=r"dp x tp x pp = 2 x 2 x 1 = 4, but the workload has "
                                        r"8 ranks"):
        load(pp=1)


def test_layers_must_split_over_the_stages():
    with pytest.raises(Exception, match="training.layers 3 is not a multiple of pp 2"):
        load(layers=3)
