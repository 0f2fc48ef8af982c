"""workload.chakra: the trace is read when the scenario is, its ranks placed on the workload's
hosts in order, and each agent gets its rank's plan."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from hostagent.workloads import chakra
from hostagent.workloads.graph import RankPlan
from hostagent.workloads.training import TrainingSpec, training_job
from testbed import cli
from testbed.errors import ScenarioError
from testbed.fabric.plan import make_plan
from testbed.run.traffic import agent_configs
from testbed.scenario import schema

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "scenarios" / "training-chakra.yaml"


def with_workload(**workload) -> str:
    text = SHIPPED.read_text()
    head = text[:text.index("workload:")]
    lines = "".join(f"  {k}: {v}\n" for k, v in workload.items())
    return f"{head}workload:\n{lines}"


def test_shipped_trace_is_the_step_it_was_written_from(tmp_path):
    """The scenario's comment says which built-in step the trace was written from: each agent
    runs that step's graph for its trace rank, placed by workload.ranks."""
    scenario, _ = schema.load(SHIPPED)
    source = training_job(TrainingSpec(dp=4, pp=2, layers=4, layer_bytes=64 << 10,
                                       activation_bytes=16 << 10, micro_batches=2,
                                       forward=0.005, backward=0.010, bucket_bytes=64 << 10))
    configs = agent_configs(make_plan(scenario), scenario, "mrc", tmp_path)
    ranks = ["h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"]
    for rank, host in enumerate(ranks):
        plan = RankPlan.from_dict(configs[host].workload.steps)
        assert configs[host].rank == rank
        assert plan.graph == source.graphs[rank]
        assert dict(plan.groups) == {"dp0.0": (0, 1, 2, 3), "dp0.1": (4, 5, 6, 7)}


def test_a_bad_trace_fails_the_scenario_naming_file_node_and_field():
    text = with_workload(chakra="{path: tests/unit/hostagent/data/chakra/one_comm_send_node.0.et"
                                ", replicate: true}")
    with pytest.raises(ScenarioError, match=r"workload\.chakra: .*one_comm_send_node\.0\.et: "
                                            r"node \d+ \(COMM_SEND_NODE\): field comm_dst"):
        schema.parse(text, "s.yaml")


def test_a_trace_for_other_ranks_and_two_step_sources_are_refused():
    with pytest.raises(ScenarioError, match=r"the trace has 4 ranks, the workload 8"):
        schema.parse(with_workload(chakra="{path: tests/unit/hostagent/data/chakra/dp}"), "s")
    with pytest.raises(ScenarioError, match=r"training and chakra are two step sources"):
        schema.parse(with_workload(chakra="{path: scenarios/traces/dp4-pp2}",
                                   training="{dp: 8}"), "s")


PYTORCH = ROOT / "tests/unit/hostagent/data/chakra/pytorch.0.et"  # data/chakra/README.md


def test_validate_prints_the_ctrl_deps_dropped_from_chakras_pytorch_trace(tmp_path, capsys):
    """3 in the file (Chakra's protobuf reader finds them), on each of the scenario's 8 ranks."""
    f = tmp_path / "s.yaml"
    f.write_text(with_workload(chakra=f"{{path: {PYTORCH.relative_to(ROOT)}, replicate: true}}"))
    assert cli.main(["validate", str(f)]) == 0
    assert (f"\n  chakra trace {PYTORCH.relative_to(ROOT)}: 24 control dependencies on nodes "
            f"absent from their trace file dropped, as Chakra's feeder ignores them (3 in each "
            f"of the 8 ranks)\n") in capsys.readouterr().out


def test_validate_refuses_a_data_dep_on_an_absent_node_as_one_problem(tmp_path, capsys):
    """Chakra's PyTorch trace with a node whose data_deps name node 3, which the converter left
    out (216 and 217 name it in their ctrl_deps)."""
    node = chakra.encode_node(999, "late", chakra.COMP_NODE, data_deps=(3,))
    (tmp_path / "p.0.et").write_bytes(gzip.decompress(PYTORCH.read_bytes())
                                      + chakra.delimited(node))
    f = tmp_path / "s.yaml"
    f.write_text(with_workload(chakra=f"{{path: {tmp_path / 'p.0.et'}, replicate: true}}"))
    assert cli.main(["validate", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{f}: invalid scenario (1 problem):\n" in err
    assert len(err.strip().splitlines()) == 2  # the file's line, the problem's
    assert (f"workload.chakra: {tmp_path / 'p.0.et'}: node 999 (late): field data_deps names node "
            f"3, which this file does not have; Chakra's feeder would never issue this node") in err
    assert "convert the trace again, or remove 3 from the node's data_deps" in err
