"""The agent's config file: what the runner writes is what the agent reads back, typed part by
part (QP settings, EV policy, workload, NIC limits, DCQCN ratios), for every shipped kind of
workload and both transports."""
from __future__ import annotations

from pathlib import Path

import pytest

from hostagent.runtime.config import AgentConfig
from testbed import scenario
from testbed.fabric.plan import make_plan
from testbed.run.traffic import agent_configs

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["quickstart", "training-straggler", "training-chakra"])
@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_a_config_reads_back_as_it_was_written(tmp_path, name, transport):
    sc, _ = scenario.load(ROOT / "scenarios" / f"{name}.yaml")
    for host, cfg in agent_configs(make_plan(sc), sc, transport, tmp_path).items():
        cfg.dump(tmp_path / f"{host}.json")
        again = AgentConfig.load(tmp_path / f"{host}.json")
        assert again == cfg
        assert (again.dcqcn is None) == (transport == "mrc")


def test_a_straggler_window_reaches_its_host_as_a_tuple(tmp_path):
    sc, _ = scenario.load(ROOT / "scenarios/training-straggler.yaml")
    configs = agent_configs(make_plan(sc), sc, "mrc", tmp_path)
    windows = {h: c.workload.stragglers for h, c in configs.items() if c.workload.stragglers}
    assert windows, "the scenario slows a rank down"
    for host, cfg in configs.items():
        cfg.dump(tmp_path / "c.json")
        assert AgentConfig.load(tmp_path / "c.json").workload.stragglers == windows.get(host, [])
